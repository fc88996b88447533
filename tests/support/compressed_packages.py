"""A small MLP saved uncompressed and compressed, as coremltools' optimizers write it.

``save_mlps(directory)`` converts Linear(16,64) → ReLU → Linear(64,64) → ReLU →
Linear(64,8) (seeded) to an ML program and saves it as ``base.mlpackage``, its 2-bit
k-means palettization as ``pal2.mlpackage`` and its int8 symmetric linear quantization
as ``q8.mlpackage`` (``weight_threshold=0``: these layers are below coremltools' default
size threshold), and ``mixed.mlpackage`` palettizes the middle layer at 2 bits, the others
at 8; ``other.mlpackage`` is a Linear(16,4) whose outputs do not match.

``compressed_packages.py:mlp`` is the same MLP as a torch factory (``run --compress``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

LAYERS = ("linear_0_cast_fp16", "linear_1_cast_fp16", "linear_2_cast_fp16")


def save_mlps(directory: Path) -> dict[str, Path]:
    """name → package path of every package in the module docstring."""
    import coremltools as ct
    import coremltools.optimize.coreml as cto
    import torch

    def converted(module: torch.nn.Module) -> ct.models.MLModel:
        traced = torch.jit.trace(module.eval(), torch.zeros(1, 16))
        return ct.convert(traced, inputs=[ct.TensorType(shape=(1, 16), name="x")],
                          convert_to="mlprogram")

    base = converted(seeded_mlp())
    models = {
        "base": base,
        "pal2": cto.palettize_weights(base, cto.OptimizationConfig(
            global_config=cto.OpPalettizerConfig(mode="kmeans", nbits=2, weight_threshold=0))),
        "q8": cto.linear_quantize_weights(base, cto.OptimizationConfig(
            global_config=cto.OpLinearQuantizerConfig(mode="linear_symmetric", dtype="int8",
                                                      weight_threshold=0))),
        "mixed": cto.palettize_weights(base, cto.OptimizationConfig(
            global_config=cto.OpPalettizerConfig(mode="kmeans", nbits=8, weight_threshold=0),
            op_name_configs={"op_2_weight_to_fp16": cto.OpPalettizerConfig(
                mode="kmeans", nbits=2, weight_threshold=0)})),
        "other": converted(torch.nn.Linear(16, 4)),
    }
    paths = {}
    for name, model in models.items():
        paths[name] = directory / f"{name}.mlpackage"
        model.save(str(paths[name]))
    return paths


def seeded_mlp() -> Any:
    """Linear(16,64) → ReLU → Linear(64,64) → ReLU → Linear(64,8), seeded."""
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                               torch.nn.ReLU(), torch.nn.Linear(64, 8))


def mlp() -> dict[str, Any]:
    """The seeded MLP as a torch factory, its example a seeded normal (1, 16) (the input is
    ``input``, after ``Sequential.forward``)."""
    import torch

    generator = torch.Generator().manual_seed(1)
    return {"module": seeded_mlp().eval(),
            "example_inputs": (torch.randn(1, 16, generator=generator),)}

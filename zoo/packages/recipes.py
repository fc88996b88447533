"""The package zoo's recipes: packages as coremltools 9.0 writes them at its defaults.

Users run ``nebisect run model.mlpackage`` on a package they already have, converted by
``ct.convert`` with its defaults (an ML program, FLOAT16 compute precision), often with
flexible shapes (``ct.RangeDim``, ``ct.EnumeratedShapes``). Each recipe builds one such
package from a small seeded torch module, in seconds; ``build.py`` writes them all. No
package is kept in git: they are built where they are judged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

RECIPES: dict[str, Callable[[Path], Path]] = {}


def recipe(fn: Callable[[Path], Path]) -> Callable[[Path], Path]:
    """Register ``fn(out_dir) -> package path`` under its name."""
    if fn.__name__ in RECIPES:
        raise ValueError(f"recipe {fn.__name__!r} registered twice")
    RECIPES[fn.__name__] = fn
    return fn


def _convert(module: Any, example: tuple[Any, ...], inputs: list[Any], path: Path,
             **options: Any) -> Path:
    """``module`` traced on ``example`` and converted at coremltools' defaults."""
    import coremltools as ct
    import torch

    traced = torch.jit.trace(module.eval(), example)
    model = ct.convert(traced, inputs=inputs, convert_to="mlprogram", **options)
    model.save(str(path))
    return path


def _embedding_tagger() -> Any:
    """int32 ids → Embedding(100, 16) → mean over the sequence → Linear(16, 4)."""
    import torch

    class Tagger(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.e = torch.nn.Embedding(100, 16)
            self.l = torch.nn.Linear(16, 4)

        def forward(self, ids: Any) -> Any:
            return self.l(self.e(ids).mean(1))

    torch.manual_seed(0)
    return Tagger()


def _ids(length: int) -> Any:
    import torch

    return torch.randint(0, 100, (1, length), dtype=torch.int32)


@recipe
def token_ids(out: Path) -> Path:
    """Token ids of a fixed length into an Embedding(100)."""
    import coremltools as ct
    import numpy as np

    return _convert(_embedding_tagger(), (_ids(8),),
                    [ct.TensorType(name="ids", shape=(1, 8), dtype=np.int32)],
                    out / "token_ids.mlpackage")


@recipe
def token_ids_range(out: Path) -> Path:
    """Token ids of a flexible length (``RangeDim(1, 64)``) into an Embedding(100)."""
    import coremltools as ct
    import numpy as np

    shape = ct.Shape(shape=(1, ct.RangeDim(1, 64, default=8)))
    return _convert(_embedding_tagger(), (_ids(8),),
                    [ct.TensorType(name="ids", shape=shape, dtype=np.int32)],
                    out / "token_ids_range.mlpackage")


@recipe
def token_ids_enumerated(out: Path) -> Path:
    """Token ids of enumerated lengths (4, 8, 16) into an Embedding(100)."""
    import coremltools as ct
    import numpy as np

    shape = ct.EnumeratedShapes(shapes=[(1, 4), (1, 8), (1, 16)], default=(1, 8))
    return _convert(_embedding_tagger(), (_ids(8),),
                    [ct.TensorType(name="ids", shape=shape, dtype=np.int32)],
                    out / "token_ids_enumerated.mlpackage")


@recipe
def int_arithmetic(out: Path) -> Path:
    """Integer arithmetic on an int32 input: ``clamp(x, min=0) + 1`` (coremltools 9.0
    lowers the clamp through float32, exact only up to 2^24)."""
    import coremltools as ct
    import numpy as np
    import torch

    class Clamp(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return torch.clamp(x, min=0) + 1

    example = torch.tensor([[0, 1, 1, 0]], dtype=torch.int32)
    return _convert(Clamp(), (example,),
                    [ct.TensorType(name="x", shape=(1, 4), dtype=np.int32)],
                    out / "int_arithmetic.mlpackage")


@recipe
def bert_finfo_mask(out: Path) -> Path:
    """A BERT-style encoder layer whose additive mask is ``(1 - mask) × finfo(float32).min``,
    as BERT's ``get_extended_attention_mask`` writes it: at coremltools' default FLOAT16
    precision the constant is stored as fp16 ``-inf``, and ``0 × -inf`` makes every
    output NaN (torch computes finite values)."""
    import coremltools as ct
    import numpy as np
    import torch

    class Encoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(100, 32)
            self.qkv = torch.nn.Linear(32, 96)
            self.out = torch.nn.Linear(32, 32)
            self.norm = torch.nn.LayerNorm(32)

        def forward(self, input_ids: Any, attention_mask: Any) -> Any:
            hidden = self.embed(input_ids)
            q, k, v = self.qkv(hidden).chunk(3, dim=-1)
            extended = (1.0 - attention_mask[:, None, :].to(hidden.dtype)) * torch.finfo(
                torch.float32).min
            scores = q @ k.transpose(-1, -2) / 32 ** 0.5 + extended
            return self.norm(hidden + self.out(scores.softmax(-1) @ v))

    torch.manual_seed(0)
    ids = torch.randint(0, 100, (1, 8), dtype=torch.int32)
    mask = torch.ones(1, 8, dtype=torch.int32)
    return _convert(Encoder(), (ids, mask),
                    [ct.TensorType(name="input_ids", shape=(1, 8), dtype=np.int32),
                     ct.TensorType(name="attention_mask", shape=(1, 8), dtype=np.int32)],
                    out / "bert_finfo_mask.mlpackage")


def _mlp() -> Any:
    """Linear(16, 64) → ReLU → Linear(64, 64) → ReLU → Linear(64, 8), seeded."""
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 64), torch.nn.ReLU(),
                               torch.nn.Linear(64, 8))


def _mlp_model() -> Any:
    import coremltools as ct
    import torch

    torch.manual_seed(1)
    traced = torch.jit.trace(_mlp().eval(), (torch.randn(1, 16),))
    return ct.convert(traced, inputs=[ct.TensorType(name="x", shape=(1, 16))],
                      convert_to="mlprogram")


@recipe
def mlp(out: Path) -> Path:
    """An MLP at coremltools' defaults: the baseline of the compressed variants."""
    path = out / "mlp.mlpackage"
    _mlp_model().save(str(path))
    return path


@recipe
def mlp_palettized4(out: Path) -> Path:
    """The MLP with 4-bit k-means palettized weights (``coremltools.optimize.coreml``)."""
    import coremltools.optimize.coreml as cto

    config = cto.OptimizationConfig(global_config=cto.OpPalettizerConfig(
        mode="kmeans", nbits=4, weight_threshold=0))
    path = out / "mlp_palettized4.mlpackage"
    cto.palettize_weights(_mlp_model(), config).save(str(path))
    return path


@recipe
def mlp_int8(out: Path) -> Path:
    """The MLP with int8 linear-quantized weights (``coremltools.optimize.coreml``)."""
    import coremltools.optimize.coreml as cto

    config = cto.OptimizationConfig(global_config=cto.OpLinearQuantizerConfig(
        mode="linear_symmetric", dtype="int8", weight_threshold=0))
    path = out / "mlp_int8.mlpackage"
    cto.linear_quantize_weights(_mlp_model(), config).save(str(path))
    return path


@recipe
def two_outputs(out: Path) -> Path:
    """A model with two outputs: softmax class scores and a sigmoid box."""
    import coremltools as ct
    import torch

    class Heads(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = torch.nn.Linear(16, 32)
            self.classes = torch.nn.Linear(32, 10)
            self.box = torch.nn.Linear(32, 4)

        def forward(self, x: Any) -> Any:
            hidden = torch.relu(self.body(x))
            return self.classes(hidden).softmax(-1), torch.sigmoid(self.box(hidden))

    torch.manual_seed(0)
    return _convert(Heads(), (torch.randn(1, 16),),
                    [ct.TensorType(name="x", shape=(1, 16))], out / "two_outputs.mlpackage")


@recipe
def conv_flexible(out: Path) -> Path:
    """Conv1d → ReLU → Conv1d over a flexible time axis (``RangeDim(8, 128)``)."""
    import coremltools as ct
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv1d(4, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv1d(8, 4, 3, padding=1))
    shape = ct.Shape(shape=(1, 4, ct.RangeDim(8, 128, default=16)))
    return _convert(model, (torch.randn(1, 4, 16),), [ct.TensorType(name="x", shape=shape)],
                    out / "conv_flexible.mlpackage")


@recipe
def running_sum_state(out: Path) -> Path:
    """A stateful decoder's cache in miniature: ``acc += x`` kept in a ``ct.StateType``
    (iOS 18), returned each step."""
    import coremltools as ct
    import torch

    class Accumulate(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("acc", torch.zeros(1, 4))

        def forward(self, x: Any) -> Any:
            self.acc.add_(x)
            return self.acc * 1.0

    return _convert(Accumulate(), (torch.ones(1, 4),), [ct.TensorType(name="x", shape=(1, 4))],
                    out / "running_sum_state.mlpackage",
                    states=[ct.StateType(wrapped_type=ct.TensorType(shape=(1, 4)), name="acc")],
                    minimum_deployment_target=ct.target.iOS18)


@recipe
def prefill_decode(out: Path) -> Path:
    """A multifunction package (``ct.utils.save_multifunction``): ``prefill`` over 8
    token ids and ``decode`` over one, sharing the embedding table."""
    import tempfile

    import coremltools as ct
    import numpy as np

    with tempfile.TemporaryDirectory() as scratch:
        parts = Path(scratch)
        for name, length in (("prefill", 8), ("decode", 1)):
            _convert(_embedding_tagger(), (_ids(length),),
                     [ct.TensorType(name="ids", shape=(1, length), dtype=np.int32)],
                     parts / f"{name}.mlpackage", minimum_deployment_target=ct.target.iOS18)
        described = ct.utils.MultiFunctionDescriptor()
        for name in ("prefill", "decode"):
            described.add_function(str(parts / f"{name}.mlpackage"), src_function_name="main",
                                   target_function_name=name)
        described.default_function_name = "prefill"
        path = out / "prefill_decode.mlpackage"
        ct.utils.save_multifunction(described, str(path))
    return path

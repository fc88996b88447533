"""A multifunction package built at test time, as ``ct.utils.save_multifunction`` ships
prefill/decode pairs: two torch modules with different input shapes converted apart,
then saved as the functions ``prefill`` (the default) and ``decode`` of one package.

``prefill`` is a small MLP that every precision computes within tolerance; ``decode``
is ``|x|`` computed as ``sqrt((1000·x)²) / 1000``, whose square passes fp16's 65504 for
|x| ≥ 0.26: the fp16 simulator returns inf where the fp64 reference returns |x|, a
failure in one function only.
"""

from __future__ import annotations

from pathlib import Path

import torch

from nebisect.mil.quiet import import_coremltools, quiet


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = torch.nn.Linear(8, 16), torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


class Square(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scaled = x * 1000.0
        return torch.sqrt(scaled * scaled) / 1000.0


#: function name → (module, the shape of its input ``x``)
FUNCTIONS = {"prefill": (Mlp, (1, 8)), "decode": (Square, (1, 3, 5))}
DEFAULT = "prefill"


def build_multifunction(directory: Path) -> Path:
    """``directory/multi.mlpackage`` (one package per function is converted beside it)."""
    ct = import_coremltools()
    descriptor = ct.utils.MultiFunctionDescriptor()
    with quiet():
        for name, (module, shape) in FUNCTIONS.items():
            example = torch.ones(shape)
            traced = torch.jit.trace(module().eval(), example)
            model = ct.convert(traced, inputs=[ct.TensorType(name="x", shape=shape)],
                               convert_to="mlprogram",
                               minimum_deployment_target=ct.target.iOS18)
            single = directory / f"{name}.mlpackage"
            model.save(str(single))
            descriptor.add_function(str(single), src_function_name="main",
                                    target_function_name=name)
        descriptor.default_function_name = DEFAULT
        package = directory / "multi.mlpackage"
        ct.utils.save_multifunction(descriptor, str(package))
    return package

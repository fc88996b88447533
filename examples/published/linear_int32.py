"""``torch.mm`` by a constant int32 matrix: converted, saved, refused when Core ML loads it.

Source: apple/coremltools issue #2575, "CoreML fails at runtime with int32 mm" (open; the
same model in pytorch/executorch #11691). coremltools 9.0 lowers ``torch.mm(x, W)`` with
a constant ``W`` to ``linear``, on both conversion paths; for int32 operands the runtime
then fails to plan the program: "Failed to build the model execution plan using a model
architecture file '…/model.mil' with error code: -14." PR #2673 (merged after 9.0) lowers
integer ``mm`` / ``bmm`` to ``matmul`` instead.

What nebisect should report with the example inputs: ``error`` at ``load`` with that text
on ``sim:fp32``, ``sim:fp16`` and ``sim:ane`` (the runtime rule ``linear-integer``,
:mod:`nebisect.mil.semantics.published`), attributed ``device``, while ``sim:fp64`` (no
unit, no rules) computes the exact product; ``nebisect lint`` flags the ``linear``.
"""

from __future__ import annotations

from typing import Any

import torch


class IntegerProjection(torch.nn.Module):
    """Multiply integer features by a fixed integer matrix (the report's model)."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.weight = torch.randint(0, 100, (8, 8), generator=generator).to(torch.int32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mm(x, self.weight)


def model() -> dict[str, Any]:
    """Example input: small integers, exact in every float type."""
    generator = torch.Generator().manual_seed(1)
    x = torch.randint(0, 100, (8, 8), generator=generator).to(torch.int32)
    return {"module": IntegerProjection(), "example_inputs": {"x": x}}

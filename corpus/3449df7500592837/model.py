"""``torch.div(a, b, rounding_mode="floor")`` on integers is computed in fp32 and returns float.

Source: apple/coremltools#2733, "torch.div with rounding_mode returns float for integer
inputs (should be int)" (closed after the 9.0 release). The PyTorch frontend's ``div``
converter casts both operands to fp32 up front and never casts the rounded result back; a
separate code path from ``torch.floor_divide`` (#2570). The report's reproducer,
``torch.div(a, b, rounding_mode="floor")`` on int32 ``[10, -10, 7, -7] / [3, 3, 2, 2]``
through jit.trace, returns float32 where torch returns int32. Checked with coremltools 9.0 /
torch 2.13: both paths emit ``cast(fp32), cast(fp32) → floor_div`` and the output is fp32.

The values follow from the float arithmetic: exact in fp32 while the dividend fits 24 bits,
in fp16 (``sim:fp16``, ``sim:ane``) only up to 2048. A frame index ``sample // hop`` is the
typical victim: with :data:`TRIGGER`, fp16 gives 30 for 4799 // 160 (torch: 29) and fp32
gives 16777216 for 16777217 // 1. Off by one, max abs error 1 — inside any float tolerance,
so it needs an integer-exact comparison (``mismatch:integer``) to be seen. The example (the
report's values) is exact on every target.

What nebisect should report with :data:`TRIGGER`: an integer mismatch attributed
``conversion`` on ``sim:fp16`` and ``sim:fp32``, both paths.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

#: Dividends past fp16's (> 2048) and fp32's (2**24 + 1) exact-integer range.
TRIGGER = {"a": np.array([4799, 2051, 16777217, -7], np.int32),
           "b": np.array([160, 1, 1, 2], np.int32)}


class DivFloor(torch.nn.Module):
    """The report's model."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.div(a, b, rounding_mode="floor")


def model() -> dict[str, Any]:
    """The report's inputs."""
    return {"module": DivFloor(),
            "example_inputs": {"a": torch.tensor([10, -10, 7, -7], dtype=torch.int32),
                               "b": torch.tensor([3, 3, 2, 2], dtype=torch.int32)}}

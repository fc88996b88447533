"""Integer ``torch.floor_divide`` is computed in float and returns a float tensor.

Source: apple/coremltools#2570, "torch.floordivide returns wrong dtype when inputs are
integers" (fixed by PR #2738, merged after the 9.0 release). The reporter's model,
``torch.floor_divide(x, y)`` on ``randint(-100, 100)`` by 2 converted through torch.export,
returns float32 where torch returns int64: the converter casts both operands to fp32 before
``floor_div``. Checked with coremltools 9.0 / torch 2.13: both paths emit
``cast(fp32) → floor_div`` and the output is fp32.

The dtype is the report's symptom; the values follow from it. An integer quotient computed
through fp32 is exact only while the dividend fits fp32's 24-bit mantissa, and through fp16
(``sim:fp16``, ``sim:ane``) only up to 2048: with :data:`TRIGGER` fp32 returns
16777216 for 16777217 // 1, and fp16 returns 30 for 4799 // 160 (4799 rounds to 4800 in
fp16; torch says 29) and 2052 for 2051 // 1. Each is an off-by-one
integer, max abs error 1, well inside a float tolerance — so it needs an integer-exact
comparison (``mismatch:integer``) to be seen. The example (the report's range) is exact on
every target.

What nebisect should report with :data:`TRIGGER`: an integer mismatch attributed
``conversion`` on ``sim:fp32`` (and ``sim:fp16``/``sim:ane``), both paths.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

#: Dividends past fp32's (2**24 + 1) and fp16's (> 2048) exact-integer range.
TRIGGER = {"x": np.array([[16777217, -16777217, 4799, 2051, -7],
                         [-7, 5, 99, -100, 0]], np.int32),
           "y": np.array([[1, 1, 160, 1, 2], [2, 2, 2, 2, 2]], np.int32)}


class FloorDivide(torch.nn.Module):
    """The report's model."""

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.floor_divide(x, y)


def model() -> dict[str, Any]:
    """The report's inputs: integers in [-100, 100) halved."""
    x = torch.randint(-100, 100, (2, 5), generator=torch.Generator().manual_seed(0),
                      dtype=torch.int32)
    return {"module": FloorDivide(),
            "example_inputs": {"x": x, "y": torch.full((2, 5), 2, dtype=torch.int32)}}

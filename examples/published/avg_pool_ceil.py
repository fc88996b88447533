"""``AvgPool2d(ceil_mode=True)``: Core ML divides the overhanging windows by the whole kernel.

Source: apple/coremltools issue #2772 ("MIL counts the ceil-mode overflow region as
padding, and PyTorch never does"), fix proposed in PR #2844 (open). coremltools 9.0
converts ``AvgPool2d(2, stride=3, ceil_mode=True)`` to ``avg_pool`` with ``ceil_mode`` and
``exclude_padding_from_average=False``; the runtime then divides every window that hangs
past the 7×7 input by 4. On ``arange(49)`` the PR quotes torch
``[[4, 7, 9.5], [25, 28, 30.5], [42.5, 45.5, 48]]`` and Core ML
``[[4, 7, 4.75], [25, 28, 15.25], [21.25, 22.75, 12]]``.

What nebisect should report with :data:`TRIGGER`: ``mismatch`` / ``tolerance`` on every
``sim:*`` target (the runtime's division, :mod:`nebisect.mil.semantics.coreml`),
attributed ``conversion`` (the exact evaluation already disagrees with torch), a pass on
``sim:fp32:spec`` (the op definition), and ``nebisect lint`` names the rule
``avg-pool-ceil-overhang``. Any non-zero input in the last row or column shows it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

#: The PR's input.
TRIGGER = {"x": np.arange(49, dtype=np.float32).reshape(1, 1, 7, 7)}


class CeilPool(torch.nn.Module):
    """Average 2×2 windows every 3 pixels, keeping the partial last window."""

    def __init__(self) -> None:
        super().__init__()
        self.pool = torch.nn.AvgPool2d(2, stride=3, ceil_mode=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def model() -> dict[str, Any]:
    """Example input: a 7×7 image of ones."""
    return {"module": CeilPool(), "example_inputs": {"x": torch.ones(1, 1, 7, 7)}}

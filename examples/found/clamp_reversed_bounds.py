"""``torch.clamp(x, lo, hi)``, tensor bounds: where ``lo > hi`` Core ML gives ``lo``, torch ``hi``.

Found by ``nebisect atlas`` (OpInfo's ``clamp`` sample 0: ``torch.clamp(x0, x1, x2)``,
random bounds, half of them reversed): not reported upstream that we could find
(searched the apple/coremltools tracker for clamp with min above max; torch documents
the case, pytorch/pytorch#45664 and PR #56367, and other compilers matched it, e.g.
csarofeen/pytorch PR #1572). torch computes ``min(max(x, lo), hi)``, so where the bounds
cross every element becomes ``hi``. coremltools 9.0 lowers tensor bounds to
``maximum(minimum(x, hi), lo)`` — the same where ``lo <= hi``, ``lo`` where they cross.
Checked with coremltools 9.0 / torch 2.13 on both conversion paths. Bounds computed at
run time (a box clipped to an image size that can be smaller than its offset, a
learned interval) can cross; the converted model then silently disagrees with torch.

What ``run`` reports with the example (bounds crossing in one element of three):
``mismatch`` / ``tolerance`` attributed ``conversion`` at ``maximum`` on every target
and both paths (the exact program already disagrees).
"""

from __future__ import annotations

from typing import Any

import torch


class ClampBetween(torch.nn.Module):
    """Clamp by bounds that are inputs, not constants."""

    def forward(self, x: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
        return torch.clamp(x, lo, hi)


def model() -> dict[str, Any]:
    return {"module": ClampBetween(), "example_inputs": {
        "x": torch.tensor([[0.25, 0.5, 2.0]]),
        "lo": torch.tensor([[0.0, 1.0, 0.0]]),     # the middle bounds cross: lo 1 > hi 0
        "hi": torch.tensor([[1.0, 0.0, 1.0]])}}

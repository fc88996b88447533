"""``torch.std(x)`` / ``torch.var(x)`` with no arguments lose Bessel's correction.

Found by ``nebisect atlas`` (OpInfo's ``std`` and ``var`` sample 0: ``torch.std(x0)``):
not reported upstream that we could find (searched the apple/coremltools tracker for
std/var with the default correction; the closest is PR #2718, ``correction >= 2`` lost
under jit.trace, and pytorch/pytorch#91203, the same default-correction bug in torch's
own MPS backend). Called without ``dim``, torch reaches ``aten::std(x, dim=None,
correction=None, keepdim=False)``; ``correction=None`` means the default, 1 (the
unbiased estimator), but coremltools 9.0's ``var``/``std`` converter reads that slot as
the boolean ``unbiased`` and ``None`` is false: the program is ``reduce_mean(square(x -
reduce_mean(x)))`` — divided by N instead of N - 1. Checked with coremltools 9.0 / torch
2.13 on both conversion paths. ``x.std()`` is how a lot of normalization code spells
it; with ``dim`` given the default is right.

The error is a factor sqrt((N-1)/N) on std and (N-1)/N on var: 0.4 % at N = 125 — enough
for ``run`` to report ``mismatch`` / ``tolerance`` attributed ``conversion`` on every
target (the exact program already disagrees with torch), at any input.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


class GlobalStd(torch.nn.Module):
    """A whole-tensor standard deviation, as ``x.std()`` in a normalization."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.std(x)


def _example() -> torch.Tensor:
    return torch.randn(5, 5, 5, generator=torch.Generator().manual_seed(0))


#: Any input shows it: the bug is the divisor.
TRIGGER = {"x": _example().numpy().astype(np.float32)}


def model() -> dict[str, Any]:
    return {"module": GlobalStd(), "example_inputs": {"x": _example()}}

"""``softmax`` (coremltools ``mil/ops/defs/iOS15/activation.py``; ``axis`` defaults to -1).

The default kernel subtracts the maximum along the axis before ``exp`` (0 where the
maximum is not finite, so an all ``-inf`` row gives NaN as in torch) and normalizes in
the compute dtype. The ``naive`` variant is ``exp(x) / Σ exp(x)`` with a sequential
accumulator: under ``fp16-naive`` any logit above ≈ 11.09 overflows ``exp`` to inf and
its row becomes NaN — the hazard a careful fp16 device avoids.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels.reduction import sequential_sum


def _axis(x: np.ndarray, axis: Any) -> int:
    return (-1 if axis is None else int(axis)) % max(x.ndim, 1)


@kernel("softmax")
def softmax(ctx: KernelContext, x: np.ndarray, axis: Any = None) -> np.ndarray:
    ax = _axis(x, axis)
    if x.size == 0:
        return x.copy()
    top = np.max(x, axis=ax, keepdims=True)
    shift = np.where(np.isfinite(top), top, x.dtype.type(0))
    e = np.subtract(x, shift)
    np.exp(e, out=e)
    e /= np.sum(e, axis=ax, keepdims=True)
    return e


@kernel("softmax", variant="naive")
def softmax_naive(ctx: KernelContext, x: np.ndarray, axis: Any = None) -> np.ndarray:
    ax = _axis(x, axis)
    e = np.exp(x)
    return e / sequential_sum(e, (ax,), True)

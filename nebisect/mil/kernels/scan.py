"""Scan and sort kernels: ``cumsum`` (exclusive / reverse), ``topk`` (ascending, sort,
return_indices) and ``argsort``.

Sorting is stable, so ties keep their input order (lower index first), which is what
coremltools' value inference (``np.argsort``) produces. ``topk`` always returns its k
elements sorted: the iOS16 ``sort=False`` only lets a device skip the sort, and the op
tests expect sorted output either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels._args import axis_of, flag, text


def _order(x: np.ndarray, axis: int, ascending: bool) -> np.ndarray:
    keys = x if ascending else -x.astype(np.result_type(x.dtype, np.int64))
    return np.argsort(keys, axis=axis, kind="stable")


@kernel("cumsum")
def cumsum(
    ctx: KernelContext, x: np.ndarray, axis: Any = 0, exclusive: Any = False, reverse: Any = False
) -> np.ndarray:
    x = np.asarray(x)
    ax = axis_of(axis, x.ndim)
    data = np.flip(x, axis=ax) if flag(reverse) else x
    out = np.cumsum(data, axis=ax, dtype=x.dtype)
    if flag(exclusive):
        out = np.roll(out, 1, axis=ax)
        first = [slice(None)] * x.ndim
        first[ax] = slice(0, 1)
        out[tuple(first)] = 0
    return np.flip(out, axis=ax) if flag(reverse) else out


@kernel("argsort")
def argsort(
    ctx: KernelContext, x: np.ndarray, axis: Any = -1, ascending: Any = False
) -> np.ndarray:
    x = np.asarray(x)
    return _order(x, axis_of(axis, x.ndim), flag(ascending)).astype(np.int32)


@kernel("topk")
def topk(
    ctx: KernelContext,
    x: np.ndarray,
    k: Any = 1,
    axis: Any = -1,
    ascending: Any = False,
    sort: Any = True,
    return_indices: Any = True,
    output_indices_dtype: Any = "int32",
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """The k largest (smallest if ascending) along ``axis``; ``k = -1`` takes all."""
    x = np.asarray(x)
    ax = axis_of(axis, x.ndim)
    order = _order(x, ax, flag(ascending))
    count = int(np.asarray(k).item())
    picked = np.take(order, np.arange(x.shape[ax] if count < 0 else count), axis=ax)
    values = np.take_along_axis(x, picked, axis=ax)
    if not flag(return_indices, True):
        return values
    return values, picked.astype(np.dtype(text(output_indices_dtype, "int32")))

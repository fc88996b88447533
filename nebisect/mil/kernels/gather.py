"""Gather kernels: ``gather`` (with ``batch_dims``), ``gather_nd``, ``gather_along_axis``.

Indices may be negative (counted from the end, as iOS15/16 define; iOS17 calls them
out of bounds, and numpy's wrap-around is as good an answer as any for undefined
behaviour). An index past the end is an error naming the op.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels._args import axis_of


def _int(value: Any) -> int:
    return int(np.asarray(value).item())


def _batched(
    fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
    x: np.ndarray,
    indices: np.ndarray,
    batch_dims: int,
) -> np.ndarray:
    """Apply ``fn`` per entry of the leading ``batch_dims`` dims shared by x and indices."""
    if batch_dims == 0:
        return fn(x, indices)
    batch = x.shape[:batch_dims]
    flat_x = x.reshape((-1, *x.shape[batch_dims:]))
    flat_i = indices.reshape((-1, *indices.shape[batch_dims:]))
    parts = [fn(xb, ib) for xb, ib in zip(flat_x, flat_i, strict=True)]
    return np.stack(parts).reshape(batch + parts[0].shape)


@kernel("gather")
def gather(
    ctx: KernelContext,
    x: np.ndarray,
    indices: Any,
    axis: Any = 0,
    batch_dims: Any = 0,
    validate_indices: Any = False,
) -> np.ndarray:
    x = np.asarray(x)
    indices = np.asarray(indices).astype(np.int64)
    batch = 0 if batch_dims is None else _int(batch_dims)
    ax = axis_of(axis, x.ndim) - batch
    return _batched(lambda p, i: np.take(p, i, axis=ax), x, indices, batch)


def _gather_nd_one(x: np.ndarray, indices: np.ndarray) -> np.ndarray:
    depth = indices.shape[-1]
    return x[tuple(indices[..., k] for k in range(depth))]


@kernel("gather_nd")
def gather_nd(
    ctx: KernelContext,
    x: np.ndarray,
    indices: Any,
    batch_dims: Any = 0,
    validate_indices: Any = False,
) -> np.ndarray:
    x = np.asarray(x)
    indices = np.asarray(indices).astype(np.int64)
    batch = 0 if batch_dims is None else _int(batch_dims)
    return _batched(_gather_nd_one, x, indices, batch)


@kernel("gather_along_axis")
def gather_along_axis(
    ctx: KernelContext, x: np.ndarray, indices: Any, axis: Any = 0, validate_indices: Any = False
) -> np.ndarray:
    x = np.asarray(x)
    return np.take_along_axis(x, np.asarray(indices).astype(np.int64), axis=axis_of(axis, x.ndim))

"""Gather and scatter kernels (``gather``, ``gather_nd``, ``gather_along_axis`` and the
matching ``scatter*`` ops with every mode).

Indices may be negative (counted from the end, as iOS15/16 define; iOS17 calls them
out of bounds, where numpy's wrap-around is as good an answer as any). Scatter updates
are applied in index order, so for duplicate indices ``update`` keeps the last write and
the arithmetic modes accumulate — the sequential semantics of the MIL definition.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nebisect.case import NebisectError
from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels._args import axis_of, text


def _assign(target: np.ndarray, index: Any, values: np.ndarray) -> None:
    target[index] = values


def _divide(target: np.ndarray, index: Any, values: np.ndarray) -> None:
    if target.dtype.kind in "iu":
        np.floor_divide.at(target, index, values)
    else:
        np.divide.at(target, index, values)


_SCATTER_MODES: dict[str, Callable[[np.ndarray, Any, np.ndarray], None]] = {
    "update": _assign,
    "add": np.add.at,
    "sub": np.subtract.at,
    "mul": np.multiply.at,
    "div": _divide,
    "max": np.maximum.at,
    "min": np.minimum.at,
}


def _scatter_into(data: np.ndarray, index: Any, updates: np.ndarray, mode: Any) -> np.ndarray:
    name = text(mode, "add")
    if name not in _SCATTER_MODES:
        raise NebisectError(f"scatter mode {name!r} is not one of {sorted(_SCATTER_MODES)}")
    out = np.array(data, copy=True)
    _SCATTER_MODES[name](out, index, np.asarray(updates, dtype=out.dtype))
    return out


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


@kernel("scatter")
def scatter(
    ctx: KernelContext,
    data: np.ndarray,
    indices: Any,
    updates: np.ndarray,
    axis: Any = 0,
    mode: Any = "add",
    validate_indices: Any = False,
) -> np.ndarray:
    """Scatter slices along ``axis``; updates are ``D[:axis] + indices.shape + D[axis+1:]``."""
    data = np.asarray(data)
    indices = np.asarray(indices).astype(np.int64)
    ax = axis_of(axis, data.ndim)
    moved = np.moveaxis(data, ax, 0)
    lead = list(range(ax, ax + indices.ndim))
    slices = np.moveaxis(np.asarray(updates), lead, list(range(indices.ndim)))
    slices = slices.reshape((indices.size, *moved.shape[1:]))
    result = _scatter_into(moved, indices.reshape(-1), slices, mode)
    return np.moveaxis(result, 0, ax)


@kernel("scatter_along_axis")
def scatter_along_axis(
    ctx: KernelContext,
    data: np.ndarray,
    indices: Any,
    updates: np.ndarray,
    axis: Any = 0,
    mode: Any = "add",
    validate_indices: Any = False,
) -> np.ndarray:
    data = np.asarray(data)
    indices = np.asarray(indices).astype(np.int64)
    ax = axis_of(axis, data.ndim)
    coords = list(np.indices(indices.shape, sparse=True))
    coords[ax] = indices
    return _scatter_into(data, tuple(coords), np.broadcast_to(updates, indices.shape), mode)


@kernel("scatter_nd")
def scatter_nd(
    ctx: KernelContext,
    data: np.ndarray,
    indices: Any,
    updates: np.ndarray,
    mode: Any = "add",
    validate_indices: Any = False,
) -> np.ndarray:
    indices = np.asarray(indices).astype(np.int64)
    index = tuple(indices[..., k] for k in range(indices.shape[-1]))
    return _scatter_into(np.asarray(data), index, updates, mode)

"""Scatter kernels: ``scatter``, ``scatter_along_axis``, ``scatter_nd`` with every mode
(update, add, sub, mul, div, max, min).

Updates are applied in index order, so for duplicate indices ``update`` keeps the last
write and the arithmetic modes accumulate — the sequential semantics of the MIL
definition. Index validity follows the op's opset:

* iOS15/16 (no ``validate_indices`` input): negative indices count from the end.
* iOS17+: only ``0 <= i < dim`` is in bounds. With ``validate_indices`` an out-of-bounds
  index fails the prediction the way the device does (a ``SimPredictError`` with Core
  ML's message); without it the result is undefined, and the simulator drops the
  out-of-bounds updates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nebisect.errors import NebisectError
from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels._args import axis_of, flag, text

DEVICE_ERROR = (
    "Unable to compute the prediction using ML Program. It can be an invalid input data or "
    "broken/unsupported model"
)


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


def _in_bounds(
    op_type: str, data: np.ndarray, index: tuple[np.ndarray, ...], validate_indices: Any
) -> np.ndarray:
    """Mask over the index grid of updates that land inside ``data`` (see module doc)."""
    strict = validate_indices is not None  # iOS17+: the op declares validate_indices
    valid = np.ones(index[0].shape, dtype=bool)
    for component, size in zip(index, data.shape, strict=False):
        low = 0 if strict else -size
        valid &= (component >= low) & (component < size)
    if not valid.all() and (not strict or flag(validate_indices)):
        bad = index[0][~valid] if len(index) == 1 else np.stack(index, -1)[~valid]
        detail = f"{op_type}: index {bad[0].tolist()} is out of bounds for shape {data.shape}"
        if strict:
            from nebisect.mil.interp import SimPredictError

            raise SimPredictError(f"{DEVICE_ERROR} ({detail}, validate_indices=True)")
        raise NebisectError(detail)
    return valid


def _scatter_into(
    op_type: str, data: np.ndarray, index: tuple[np.ndarray, ...], updates: np.ndarray,
    mode: Any, validate_indices: Any,
) -> np.ndarray:
    """Apply ``updates`` (index grid shape + slice shape) at ``index`` (one int array per
    leading dim of ``data``, all of the index grid's shape)."""
    name = text(mode, "add")
    if name not in _SCATTER_MODES:
        raise NebisectError(f"scatter mode {name!r} is not one of {sorted(_SCATTER_MODES)}")
    keep = _in_bounds(op_type, data, index, validate_indices)
    out = np.array(data, copy=True)
    values = np.asarray(updates, dtype=out.dtype)
    if not keep.all():
        index = tuple(component[keep] for component in index)
        values = values[keep]
    _SCATTER_MODES[name](out, index, values)
    return out


@kernel("scatter")
def scatter(
    ctx: KernelContext,
    data: np.ndarray,
    indices: Any,
    updates: np.ndarray,
    axis: Any = 0,
    mode: Any = "add",
    validate_indices: Any = None,
) -> np.ndarray:
    """Scatter slices along ``axis``; updates are ``D[:axis] + indices.shape + D[axis+1:]``."""
    data = np.asarray(data)
    indices = np.asarray(indices).astype(np.int64)
    ax = axis_of(axis, data.ndim)
    moved = np.moveaxis(data, ax, 0)
    lead = list(range(ax, ax + indices.ndim))
    slices = np.moveaxis(np.asarray(updates), lead, list(range(indices.ndim)))
    slices = slices.reshape((indices.size, *moved.shape[1:]))
    result = _scatter_into(
        "scatter", moved, (indices.reshape(-1),), slices, mode, validate_indices
    )
    return np.moveaxis(result, 0, ax)


@kernel("scatter_along_axis")
def scatter_along_axis(
    ctx: KernelContext,
    data: np.ndarray,
    indices: Any,
    updates: np.ndarray,
    axis: Any = 0,
    mode: Any = "add",
    validate_indices: Any = None,
) -> np.ndarray:
    data = np.asarray(data)
    indices = np.asarray(indices).astype(np.int64)
    ax = axis_of(axis, data.ndim)
    coords = list(np.indices(indices.shape))
    coords[ax] = indices
    values = np.broadcast_to(updates, indices.shape)
    return _scatter_into(
        "scatter_along_axis", data, tuple(coords), values, mode, validate_indices
    )


@kernel("scatter_nd")
def scatter_nd(
    ctx: KernelContext,
    data: np.ndarray,
    indices: Any,
    updates: np.ndarray,
    mode: Any = "add",
    validate_indices: Any = None,
) -> np.ndarray:
    indices = np.asarray(indices).astype(np.int64)
    index = tuple(indices[..., k] for k in range(indices.shape[-1]))
    return _scatter_into(
        "scatter_nd", np.asarray(data), index, np.asarray(updates), mode, validate_indices
    )

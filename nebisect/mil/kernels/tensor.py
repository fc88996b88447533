"""Tensor-manipulation kernels: reshape, transpose, concat/split/stack, slicing, padding.

These ops move values without arithmetic, so they are exact at every precision and
keep the input dtype (ints stay ints, floats stay in the compute dtype). Semantics
follow coremltools' op definitions (``ops/defs/iOS15..iOS18/tensor_*.py``); where a
later opset generalises an earlier one (iOS17 ``reshape`` zeros) the general form is
implemented, which agrees with the older one on every program the older one accepts.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from nebisect.errors import NebisectError
from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels._args import axis_of, flag, ints, text

_PAD_MODES: dict[str, Literal["constant", "reflect", "edge"]] = {
    "constant": "constant", "reflect": "reflect", "replicate": "edge"
}


def _target_shape(in_shape: tuple[int, ...], shape: list[int]) -> list[int]:
    """Resolve MIL reshape's ``0`` (copy the matching input dim, counted from the right,
    1 when out of range — iOS17 rule, identical to iOS15 when ranks match) and ``-1``."""
    rank, count = len(in_shape), len(shape)
    resolved = []
    for i, dim in enumerate(shape):
        if dim == 0:
            j = rank - (count - i)
            dim = in_shape[j] if 0 <= j < rank else 1
        resolved.append(dim)
    if -1 in resolved:
        known = int(np.prod([d for d in resolved if d != -1]))
        resolved[resolved.index(-1)] = int(np.prod(in_shape)) // max(known, 1)
    return resolved


@kernel("reshape")
def reshape(ctx: KernelContext, x: np.ndarray, shape: Any) -> np.ndarray:
    return np.reshape(x, _target_shape(np.shape(x), ints(shape)))


@kernel("reshape_like")
def reshape_like(
    ctx: KernelContext,
    x: np.ndarray,
    ref_tensors: list[np.ndarray],
    begins: list[Any],
    ends: list[Any],
    end_masks: list[Any],
) -> np.ndarray:
    shape: list[int] = []
    for ref, begin, end, end_mask in zip(ref_tensors, begins, ends, end_masks, strict=True):
        dims = np.shape(ref)
        start = int(np.asarray(begin))
        shape.extend(dims[start:] if flag(end_mask) else dims[start : int(np.asarray(end))])
    return np.reshape(x, shape)


@kernel("transpose")
def transpose(ctx: KernelContext, x: np.ndarray, perm: Any) -> np.ndarray:
    return np.transpose(x, ints(perm))


@kernel("expand_dims")
def expand_dims(ctx: KernelContext, x: np.ndarray, axes: Any) -> np.ndarray:
    out_rank = np.ndim(x) + len(ints(axes))
    shape = list(np.shape(x))
    for axis in sorted(axis_of(a, out_rank) for a in ints(axes)):
        shape.insert(axis, 1)
    return np.reshape(x, shape)


@kernel("squeeze")
def squeeze(ctx: KernelContext, x: np.ndarray, axes: Any = None) -> np.ndarray:
    """Squeeze size-1 dims; like PyTorch, a listed axis whose size is not 1 is kept."""
    shape = np.shape(x)
    if axes is None:
        drop = {i for i, d in enumerate(shape) if d == 1}
    else:
        drop = {axis_of(a, len(shape)) for a in ints(axes)}
        drop = {i for i in drop if shape[i] == 1}
    return np.reshape(x, [d for i, d in enumerate(shape) if i not in drop])


@kernel("flatten2d")
def flatten2d(ctx: KernelContext, x: np.ndarray, axis: Any = 1) -> np.ndarray:
    shape = np.shape(x)
    split = axis_of(axis, len(shape))
    return np.reshape(x, (int(np.prod(shape[:split])), int(np.prod(shape[split:]))))


@kernel("concat")
def concat(
    ctx: KernelContext, values: list[np.ndarray], axis: Any, interleave: Any = False
) -> np.ndarray:
    arrays = [np.asarray(v) for v in values]
    if arrays[0].ndim == 0:
        return np.stack(arrays)
    ax = axis_of(axis, arrays[0].ndim)
    if not flag(interleave):
        return np.concatenate(arrays, axis=ax)
    stacked = np.stack(arrays, axis=ax + 1)
    shape = list(arrays[0].shape)
    shape[ax] *= len(arrays)
    return stacked.reshape(shape)


@kernel("split")
def split(
    ctx: KernelContext,
    x: np.ndarray,
    axis: Any,
    num_splits: Any = None,
    split_sizes: Any = None,
) -> np.ndarray | tuple[np.ndarray, ...]:
    """Split along ``axis`` by ``split_sizes``, else evenly into ``num_splits`` parts
    (a single part is returned bare: one output is one array)."""
    ax = axis_of(axis, np.ndim(x))
    if split_sizes is not None:
        parts = np.split(x, np.cumsum(ints(split_sizes))[:-1], axis=ax)
    else:
        parts = np.split(x, int(np.asarray(num_splits)), axis=ax)
    return parts[0] if len(parts) == 1 else tuple(parts)


@kernel("stack")
def stack(ctx: KernelContext, values: list[np.ndarray], axis: Any) -> np.ndarray:
    arrays = [np.asarray(v) for v in values]
    return np.stack(arrays, axis=axis_of(axis, arrays[0].ndim + 1))


@kernel("tile")
def tile(ctx: KernelContext, x: np.ndarray, reps: Any) -> np.ndarray:
    return np.tile(x, ints(reps))


def _index_slices(
    rank: int,
    begin: Any,
    end: Any,
    stride: Any,
    begin_mask: Any,
    end_mask: Any,
    squeeze_mask: Any,
) -> tuple[tuple[Any, ...], list[int]]:
    """numpy slices for MIL's slice_by_index parameters, plus the axes to squeeze."""
    starts: list[int | None] = list(ints(begin))
    stops: list[int | None] = list(ints(end))
    steps = ints(stride) or [1] * rank
    squeeze_axes: list[int] = []
    masks = (
        np.asarray(begin_mask if begin_mask is not None else [False] * rank, dtype=bool),
        np.asarray(end_mask if end_mask is not None else [False] * rank, dtype=bool),
        np.asarray(squeeze_mask if squeeze_mask is not None else [False] * rank, dtype=bool),
    )
    items: list[Any] = []
    for i in range(rank):
        if masks[0][i]:
            starts[i] = None
        if masks[1][i]:
            stops[i] = None
        if masks[2][i]:
            squeeze_axes.append(i)
            items.append(slice(starts[i], None, np.iinfo(np.int32).max))
        else:
            items.append(slice(starts[i], stops[i], steps[i]))
    return tuple(items), squeeze_axes


@kernel("slice_by_index")
def slice_by_index(
    ctx: KernelContext,
    x: np.ndarray,
    begin: Any,
    end: Any,
    stride: Any = None,
    begin_mask: Any = None,
    end_mask: Any = None,
    squeeze_mask: Any = None,
) -> np.ndarray:
    x = np.asarray(x)
    items, squeeze_axes = _index_slices(
        x.ndim, begin, end, stride, begin_mask, end_mask, squeeze_mask
    )
    out = x[items]
    return np.squeeze(out, axis=tuple(squeeze_axes)) if squeeze_axes else out


@kernel("slice_update")
def slice_update(
    ctx: KernelContext,
    x: np.ndarray,
    update: np.ndarray,
    begin: Any,
    end: Any,
    stride: Any = None,
    begin_mask: Any = None,
    end_mask: Any = None,
    squeeze_mask: Any = None,
) -> np.ndarray:
    out = np.array(x, copy=True)
    items, _ = _index_slices(out.ndim, begin, end, stride, begin_mask, end_mask, squeeze_mask)
    out[items] = np.reshape(update, out[items].shape)
    return out


@kernel("slice_by_size")
def slice_by_size(ctx: KernelContext, x: np.ndarray, begin: Any, size: Any) -> np.ndarray:
    x = np.asarray(x)
    items = []
    for dim, start, length in zip(x.shape, ints(begin), ints(size), strict=True):
        start = start + dim if start < 0 else start
        items.append(slice(start, None) if length < 0 else slice(start, start + length))
    return x[tuple(items)]


@kernel("pad")
def pad(
    ctx: KernelContext,
    x: np.ndarray,
    pad: Any,
    mode: Any = "constant",
    constant_val: Any = 0.0,
) -> np.ndarray:
    """Pad the last ``len(pad) // 2`` dims; ``replicate`` is numpy's ``edge``."""
    x = np.asarray(x)
    amounts = ints(pad)
    widths = [(0, 0)] * (x.ndim - len(amounts) // 2)
    widths += [(amounts[2 * i], amounts[2 * i + 1]) for i in range(len(amounts) // 2)]
    name = text(mode, "constant")
    if name not in _PAD_MODES:
        raise NebisectError(f"pad mode {name!r} is not one of {sorted(_PAD_MODES)}")
    np_mode = _PAD_MODES[name]
    if np_mode == "constant":
        fill = 0.0 if constant_val is None else np.asarray(constant_val).item()
        return np.pad(x, widths, mode="constant", constant_values=fill)
    return np.pad(x, widths, mode=np_mode)


@kernel("reverse")
def reverse(ctx: KernelContext, x: np.ndarray, axes: Any = None) -> np.ndarray:
    rank = np.ndim(x)
    dims = range(rank) if axes is None else [axis_of(a, rank) for a in ints(axes)]
    return np.flip(x, axis=tuple(dims)) if rank else np.asarray(x)


@kernel("reverse_sequence")
def reverse_sequence(
    ctx: KernelContext,
    x: np.ndarray,
    lengths: Any,
    seq_axis: Any = 0,
    batch_axis: Any = 0,
) -> np.ndarray:
    """Reverse the first ``lengths[b]`` elements along ``seq_axis`` of each batch entry."""
    x = np.asarray(x)
    seq, batch = axis_of(seq_axis, x.ndim), axis_of(batch_axis, x.ndim)
    moved = np.moveaxis(x, (batch, seq), (0, 1))
    out = np.array(moved, copy=True)
    for b, length in enumerate(ints(lengths)):
        out[b, :length] = moved[b, :length][::-1]
    return np.moveaxis(out, (0, 1), (batch, seq))


@kernel("sliding_windows")
def sliding_windows(
    ctx: KernelContext, x: np.ndarray, axis: Any, size: Any, stride: Any = 1
) -> np.ndarray:
    """Windows of ``size`` every ``stride`` along ``axis``; the window dim follows it."""
    x = np.asarray(x)
    ax = axis_of(axis, x.ndim)
    windows = np.lib.stride_tricks.sliding_window_view(x, int(np.asarray(size)), axis=ax)
    step = [slice(None)] * windows.ndim
    step[ax] = slice(None, None, int(np.asarray(stride)))
    return np.ascontiguousarray(np.moveaxis(windows[tuple(step)], -1, ax + 1))

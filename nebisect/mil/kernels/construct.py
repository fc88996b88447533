"""Kernels that create or select values: fill, range_1d, one_hot, shape, cast, select,
band_part, non_zero (``identity`` lives with the elementwise family).

Their result dtype is whatever the op declares (``fill`` of an int value is int32,
``cast`` to fp16 is a float), read from the op through :func:`output_dtype`; floating
results are produced in the compute dtype and rounded by the precision model, so a
``cast`` to fp16 is an identity in the fp64 oracle, exactly as the design asks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels._args import axis_of, ints, numpy_dtype_of, output_dtype, text


def _fill_dtype(ctx: KernelContext, value: Any) -> Any:
    value = np.asarray(value)
    fallback = ctx.dtype if value.dtype.kind == "f" else value.dtype
    return output_dtype(ctx, fallback=fallback)


@kernel("fill")
def fill(ctx: KernelContext, shape: Any, value: Any = 0.0) -> np.ndarray:
    return np.full(ints(shape), np.asarray(value).item(), dtype=_fill_dtype(ctx, value))


@kernel("fill_like")
def fill_like(ctx: KernelContext, ref_tensor: np.ndarray, value: Any = 0.0) -> np.ndarray:
    return np.full(np.shape(ref_tensor), np.asarray(value).item(), dtype=_fill_dtype(ctx, value))


@kernel("range_1d")
def range_1d(ctx: KernelContext, end: Any, start: Any, step: Any) -> np.ndarray:
    """``start + step * i`` rounded to the result dtype, as many values as the op declares
    when its length is static: coremltools keeps a range past 65504 in fp32 while an fp16
    simulation holds its ``end`` as ``inf``, so the declared length sizes it (the tail
    rounds to ``inf`` in fp16) where the operands cannot."""
    dtype = output_dtype(ctx, fallback=np.asarray(start).dtype)
    first, last, stride = (np.asarray(v).item() for v in (start, end, step))
    declared: tuple[Any, ...] = tuple(ctx.op.outputs[0].shape) if ctx.op is not None else ()
    if len(declared) == 1 and isinstance(declared[0], int):
        values = first + stride * np.arange(declared[0], dtype=np.float64)
    else:
        values = np.arange(first, last, stride)
    with np.errstate(over="ignore", invalid="ignore"):
        return values.astype(dtype)


@kernel("shape")
def shape(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return np.asarray(np.shape(x), dtype=np.int32)


@kernel("cast")
def cast(ctx: KernelContext, x: np.ndarray, dtype: Any) -> np.ndarray:
    """numpy ``astype`` semantics (float → int truncates toward zero)."""
    return np.asarray(x).astype(numpy_dtype_of(text(dtype), ctx))


@kernel("select")
def select(ctx: KernelContext, cond: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = np.asarray(a), np.asarray(b)
    out = np.where(np.asarray(cond).astype(bool), a, b)
    return out.astype(np.result_type(a, b), copy=False)


@kernel("band_part")
def band_part(ctx: KernelContext, x: np.ndarray, lower: Any = -1, upper: Any = -1) -> np.ndarray:
    """Keep the band ``(lower < 0 or m - n <= lower) and (upper < 0 or n - m <= upper)``."""
    x = np.asarray(x)
    rows, cols = x.shape[-2:]
    diff = np.arange(rows)[:, None] - np.arange(cols)[None, :]
    low, up = int(np.asarray(lower)), int(np.asarray(upper))
    keep = ((low < 0) | (diff <= low)) & ((up < 0) | (-diff <= up))
    return np.where(keep, x, np.zeros((), dtype=x.dtype))


@kernel("non_zero")
def non_zero(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return np.transpose(np.nonzero(np.asarray(x))).astype(np.int32)


@kernel("one_hot")
def one_hot(
    ctx: KernelContext,
    indices: np.ndarray,
    one_hot_vector_size: Any,
    axis: Any = -1,
    on_value: Any = 1,
    off_value: Any = 0,
) -> np.ndarray:
    """One-hot along a new axis; an index outside ``[0, size)`` gives an all-off vector."""
    indices = np.asarray(indices)
    depth = int(np.asarray(one_hot_vector_size))
    hot = indices[..., None] == np.arange(depth)
    dtype = output_dtype(ctx, fallback=np.asarray(on_value).dtype)
    out = np.where(hot, np.asarray(on_value).item(), np.asarray(off_value).item()).astype(dtype)
    return np.moveaxis(out, -1, axis_of(axis, indices.ndim + 1))

"""Kernels of the ``constexpr_*`` ops that carry compressed weights (iOS16 and iOS18).

Each decompresses its constant inputs the way coremltools' ``decompress`` /
``materialized_val_inference`` define; a device materialises the same values at load
time. iOS16 and iOS18 reuse op names with different inputs (iOS16 ``lut_to_dense`` and
``sparse_to_dense`` take bit-packed bytes plus a ``shape``; iOS18 ones take unpacked
sub-byte arrays), so the kernels dispatch on which inputs are present. Floating results
come out in the compute dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels._args import axis_of, ints, numpy_dtype_of, text


def expand_blocks(param: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Repeat each entry of a per-block ``param`` over its block of a ``shape`` tensor
    (block size ``shape[d] // param.shape[d]`` in every dim)."""
    interleaved = []
    for dim, count in zip(shape, param.shape, strict=True):
        interleaved += [count, dim // count]
    spread = param.reshape([d if i % 2 == 0 else 1 for i, d in enumerate(interleaved)])
    return np.broadcast_to(spread, interleaved).reshape(shape)


def along_axis(param: Any, rank: int, axis: Any) -> np.ndarray:
    """A scalar or per-``axis`` vector quantization parameter, shaped to broadcast."""
    value = np.asarray(param)
    if value.ndim in (0, rank):
        return value
    shape = [1] * rank
    shape[axis_of(axis, rank)] = value.size
    return value.reshape(shape)


def _unpack_bits(packed: np.ndarray, nbits: int, count: int) -> np.ndarray:
    """LSB-first ``nbits``-wide unsigned fields of a byte array (coremltools' packing)."""
    bits = np.unpackbits(packed.astype(np.uint8).reshape(-1), bitorder="little")
    fields = bits[: count * nbits].reshape(count, nbits).astype(np.int64)
    return (fields << np.arange(nbits)).sum(axis=1)


@kernel("constexpr_affine_dequantize")
def constexpr_affine_dequantize(
    ctx: KernelContext, quantized_data: Any, zero_point: Any, scale: Any, axis: Any
) -> np.ndarray:
    data = np.asarray(quantized_data)
    zp = along_axis(zero_point, data.ndim, axis).astype(ctx.dtype)
    return (data.astype(ctx.dtype) - zp) * along_axis(scale, data.ndim, axis).astype(ctx.dtype)


@kernel("constexpr_cast")
def constexpr_cast(ctx: KernelContext, source_val: Any, output_dtype: Any) -> np.ndarray:
    return np.asarray(source_val).astype(numpy_dtype_of(text(output_dtype), ctx))


def _lut_lookup(indices: np.ndarray, lut: np.ndarray, vector_axis: Any) -> np.ndarray:
    """iOS18 (block-wise, vector) palettization without materialising repeated LUTs."""
    rank = indices.ndim
    grids = []
    for d in range(rank):
        block = indices.shape[d] // lut.shape[d]
        shape = [1] * rank
        shape[d] = indices.shape[d]
        grids.append((np.arange(indices.shape[d]) // block).reshape(shape))
    picked = lut[(*grids, indices.astype(np.int64))]
    vector = lut.shape[-1]
    if vector == 1:
        return picked[..., 0]
    ax = axis_of(vector_axis, rank)
    out_shape = list(indices.shape)
    out_shape[ax] *= vector
    return np.moveaxis(picked, -1, ax + 1).reshape(out_shape)


@kernel("constexpr_lut_to_dense")
def constexpr_lut_to_dense(
    ctx: KernelContext, indices: Any, lut: Any, shape: Any = None, vector_axis: Any = None
) -> np.ndarray:
    table = np.asarray(lut)
    if shape is not None:
        dims = ints(shape)
        nbits = int(np.log2(table.size))
        flat = _unpack_bits(np.asarray(indices), nbits, int(np.prod(dims)))
        out = table[flat].reshape(dims)
    else:
        out = _lut_lookup(np.asarray(indices), table, vector_axis)
    return out.astype(ctx.dtype) if out.dtype.kind == "f" else out


def _scatter_mask(nonzero: np.ndarray, mask: np.ndarray) -> np.ndarray:
    dense = np.zeros(mask.shape, dtype=nonzero.dtype)
    dense[mask != 0] = nonzero
    return dense


@kernel("constexpr_sparse_to_dense")
def constexpr_sparse_to_dense(
    ctx: KernelContext, nonzero_data: Any, mask: Any, shape: Any = None
) -> np.ndarray:
    values = np.asarray(nonzero_data)
    if shape is not None:
        dims = ints(shape)
        bits = _unpack_bits(np.asarray(mask), 1, int(np.prod(dims))).reshape(dims)
    else:
        bits = np.asarray(mask)
    dense = _scatter_mask(values, bits)
    return dense.astype(ctx.dtype) if dense.dtype.kind == "f" else dense


def _shift_scale(data: np.ndarray, scale: np.ndarray, offset: Any, dtype: Any) -> np.ndarray:
    values = data.astype(dtype)
    if offset is not None:
        values = values - expand_blocks(np.asarray(offset).astype(dtype), data.shape)
    return values * expand_blocks(scale.astype(dtype), data.shape)


@kernel("constexpr_blockwise_shift_scale")
def constexpr_blockwise_shift_scale(
    ctx: KernelContext, data: Any, scale: Any, offset: Any = None
) -> np.ndarray:
    return _shift_scale(np.asarray(data), np.asarray(scale), offset, ctx.dtype)


@kernel("constexpr_lut_to_sparse")
def constexpr_lut_to_sparse(
    ctx: KernelContext,
    indices_mask: Any,
    indices_nonzero_data: Any,
    lut: Any,
    vector_axis: Any = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(mask of the de-palettized data, its nonzero values); vectors widen the mask."""
    mask = np.asarray(indices_mask)
    indices = _scatter_mask(np.asarray(indices_nonzero_data), mask)
    table = np.asarray(lut)
    dense = _lut_lookup(indices, table, vector_axis)
    if table.shape[-1] > 1:
        mask = np.repeat(mask, table.shape[-1], axis=axis_of(vector_axis, mask.ndim))
    values = dense[mask != 0].reshape(-1)
    return mask, values.astype(ctx.dtype) if values.dtype.kind == "f" else values


@kernel("constexpr_sparse_blockwise_shift_scale")
def constexpr_sparse_blockwise_shift_scale(
    ctx: KernelContext, data_mask: Any, nonzero_data: Any, scale: Any, offset: Any = None
) -> tuple[np.ndarray, np.ndarray]:
    mask = np.asarray(data_mask)
    dense = _scatter_mask(np.asarray(nonzero_data), mask)
    values = _shift_scale(dense, np.asarray(scale), offset, ctx.dtype)
    return mask, values[mask != 0].reshape(-1)

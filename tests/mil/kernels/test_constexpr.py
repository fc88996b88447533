"""constexpr_* decompression and quantize/dequantize kernels against coremltools'
``materialized_val_inference`` / value inference of the same op."""

from __future__ import annotations

import numpy as np
import pytest

from nebisect.mil.quiet import import_coremltools
from nebisect.mil.single_op import build_op, inferred_outputs, run_kernel

import_coremltools()
from coremltools.converters.mil.mil import types  # noqa: E402

RNG = np.random.default_rng(19)
INT4 = types.np_int4_dtype
UINT1 = types.np_uint1_dtype


def _close(ours, reference):
    reference = np.asarray(reference)
    assert np.shape(ours) == reference.shape
    np.testing.assert_allclose(np.asarray(ours, np.float64), reference.astype(np.float64),
                               rtol=2e-3, atol=1e-6)


def _check(op):
    reference = op.materialized_val_inference()
    reference = reference if isinstance(reference, tuple) else (reference,)
    got = run_kernel(op)
    assert len(got) == len(reference)
    for ours, theirs in zip(got, reference, strict=True):
        _close(ours, theirs)


@pytest.mark.parametrize("axis, scale_shape", [(0, (4,)), (1, (6,)), (1, ())])
def test_affine_dequantize(axis, scale_shape):
    data = RNG.integers(0, 256, size=(4, 6)).astype(np.uint8)
    zp = RNG.integers(0, 256, size=scale_shape).astype(np.uint8)
    scale = RNG.uniform(0.01, 0.1, size=scale_shape).astype(np.float32)
    _check(build_op("constexpr_affine_dequantize", "iOS16", quantized_data=data,
                    zero_point=zp, scale=scale, axis=axis))


def test_constexpr_cast():
    op = build_op("constexpr_cast", "iOS16", source_val=RNG.standard_normal(5).astype(np.float16),
                  output_dtype="fp32")
    _check(op)


@pytest.mark.parametrize("nbits", [1, 2, 4, 6, 8])
def test_iOS16_lut_to_dense_unpacks_bits(nbits):
    shape = np.array([3, 5], np.uint32)
    packed = RNG.integers(0, 256, size=int(np.ceil(nbits * 15 / 8))).astype(np.uint8)
    lut = RNG.standard_normal(2**nbits).astype(np.float32)
    _check(build_op("constexpr_lut_to_dense", "iOS16", indices=packed, lut=lut, shape=shape))


def test_iOS16_sparse_to_dense_unpacks_mask():
    mask = np.array([0b10110001, 0b00000001], np.uint8)  # 10 bits used, padding unset
    count = bin(mask[0]).count("1") + bin(mask[1]).count("1")
    op = build_op("constexpr_sparse_to_dense", "iOS16",
                  nonzero_data=RNG.standard_normal(count).astype(np.float32), mask=mask,
                  shape=np.array([2, 5], np.uint32))
    _check(op)


@pytest.mark.parametrize("with_offset", [False, True])
def test_blockwise_shift_scale_int4(with_offset):
    data = RNG.integers(-8, 8, size=(4, 6)).astype(INT4)
    kwargs = {"data": data, "scale": RNG.uniform(0.1, 1, size=(2, 3)).astype(np.float16)}
    if with_offset:
        kwargs["offset"] = RNG.integers(-8, 8, size=(2, 3)).astype(INT4)
    _check(build_op("constexpr_blockwise_shift_scale", "iOS18", **kwargs))


@pytest.mark.parametrize(
    "indices_shape, lut_shape, vector_axis",
    [((4, 6), (2, 1, 4, 1), None), ((4, 6), (1, 3, 16, 1), None), ((2, 6), (1, 1, 4, 3), 0),
     ((4, 3), (2, 1, 2, 2), 1)],
)
def test_iOS18_lut_to_dense_blocks_and_vectors(indices_shape, lut_shape, vector_axis):
    palettes = lut_shape[-2]
    indices = RNG.integers(0, palettes, size=indices_shape).astype(
        types.nptype_from_builtin(types.string_to_builtin(f"uint{int(np.log2(palettes))}")))
    kwargs = {"indices": indices, "lut": RNG.standard_normal(lut_shape).astype(np.float16)}
    if vector_axis is not None:
        kwargs["vector_axis"] = vector_axis
    _check(build_op("constexpr_lut_to_dense", "iOS18", **kwargs))


def test_iOS18_sparse_to_dense():
    mask = np.array([[1, 0, 1], [0, 1, 1]]).astype(UINT1)
    op = build_op("constexpr_sparse_to_dense", "iOS18",
                  nonzero_data=RNG.standard_normal(4).astype(np.float32), mask=mask)
    _check(op)


def test_lut_to_sparse_and_sparse_shift_scale():
    mask = np.array([[1, 0, 1, 1], [0, 1, 0, 1]]).astype(UINT1)
    op = build_op("constexpr_lut_to_sparse", "iOS18", indices_mask=mask,
                  indices_nonzero_data=np.array([0, 1, 1, 0, 1]).astype(UINT1),
                  lut=RNG.standard_normal((1, 1, 2, 2)).astype(np.float32), vector_axis=1)
    _check(op)
    op = build_op("constexpr_sparse_blockwise_shift_scale", "iOS18", data_mask=mask,
                  nonzero_data=RNG.integers(-8, 8, size=5).astype(np.int8),
                  scale=RNG.uniform(0.1, 1, size=(2, 1)).astype(np.float32),
                  offset=np.array([[1], [-2]], np.int8))
    _check(op)


@pytest.mark.parametrize("dtype", ["int8", "uint8"])
def test_quantize_dequantize_round_trip(dtype):
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    scale = np.float32(0.02)
    zp = np.array(3 if dtype == "int8" else 128, dtype=dtype)
    q_op = build_op("quantize", "iOS17", input=x, scale=scale, zero_point=zp, output_dtype=dtype)
    (q,) = run_kernel(q_op)
    np.testing.assert_array_equal(q, inferred_outputs(q_op)[0])
    assert q.dtype == np.dtype(dtype)
    per_axis = RNG.uniform(0.01, 0.05, size=4).astype(np.float32)
    d_op = build_op("dequantize", "iOS17", input=q, scale=per_axis,
                    zero_point=np.full(4, zp, dtype=dtype), axis=1)
    (d,) = run_kernel(d_op)
    _close(d, d_op.materialized_val_inference())

"""Tensor-manipulation, value-creating and layout kernels against coremltools' own value
inference (the op definition) or, where coremltools has none, against torch."""

from __future__ import annotations

import numpy as np
import pytest

from nebisect.mil.kernels import KernelContext, get_kernel
from nebisect.mil.single_op import build_op, inferred_outputs, run_kernel

RNG = np.random.default_rng(7)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32)
I32 = np.arange(24, dtype=np.int32).reshape(2, 3, 4)

VALUE_INFERENCE_CASES = [
    ("reshape", "iOS15", {"x": X, "shape": np.array([4, -1], np.int32)}),
    ("reshape", "iOS15", {"x": X, "shape": np.array([0, -1, 2], np.int32)}),
    ("reshape", "iOS17", {"x": X, "shape": np.array([1, 0, -1, 0], np.int32)}),
    ("transpose", "iOS18", {"x": X, "perm": np.array([2, 0, 1], np.int32)}),
    ("transpose", "iOS18", {"x": I32, "perm": np.array([-1, 1, 0], np.int32)}),
    ("expand_dims", "iOS18", {"x": X, "axes": np.array([0, -1], np.int32)}),
    ("squeeze", "iOS18", {"x": X.reshape(1, 2, 1, 12), "axes": np.array([0, 2], np.int32)}),
    ("squeeze", "iOS18", {"x": X.reshape(1, 2, 1, 12)}),
    ("flatten2d", "iOS18", {"x": X, "axis": -1}),
    ("concat", "iOS18", {"values": [X, X * 2], "axis": -1}),
    ("concat", "iOS18", {"values": [I32, I32 + 1], "axis": 0}),
    ("split", "iOS18", {"x": X, "num_splits": 2, "axis": -1}),
    ("split", "iOS18", {"x": X, "split_sizes": np.array([1, 2], np.int32), "axis": 1}),
    ("stack", "iOS18", {"values": [X, -X, X], "axis": 1}),
    ("tile", "iOS18", {"x": X, "reps": np.array([1, 2, 3], np.int32)}),
    ("slice_by_index", "iOS18", {"x": X, "begin": np.array([0, 1, -3], np.int32),
                                  "end": np.array([2, 3, 4], np.int32),
                                  "stride": np.array([1, 1, 2], np.int32)}),
    ("slice_by_index", "iOS18", {"x": X, "begin": np.array([1, 0, 0], np.int32),
                                  "end": np.array([0, 2, 0], np.int32),
                                  "end_mask": np.array([True, False, True]),
                                  "squeeze_mask": np.array([True, False, False])}),
    ("slice_by_index", "iOS18", {"x": X, "begin": np.array([0, 2, 3], np.int32),
                                  "end": np.array([2, 0, 0], np.int32),
                                  "stride": np.array([1, -1, -1], np.int32),
                                  "begin_mask": np.array([False, True, False]),
                                  "end_mask": np.array([False, True, True])}),
    ("slice_by_size", "iOS18", {"x": X, "begin": np.array([1, -2, 0], np.int32),
                                 "size": np.array([1, -1, 3], np.int32)}),
    ("slice_update", "iOS18", {"x": X, "update": np.zeros((2, 1, 2), np.float32),
                                "begin": np.array([0, 1, 0], np.int32),
                                "end": np.array([2, 2, 4], np.int32),
                                "stride": np.array([1, 1, 2], np.int32)}),
    ("pad", "iOS18", {"x": X, "pad": np.array([1, 2, 0, 3], np.int32), "constant_val": 2.5}),
    ("pad", "iOS18", {"x": X, "pad": np.array([1, 1, 2, 3], np.int32), "mode": "reflect"}),
    ("pad", "iOS18", {"x": X, "pad": np.array([0, 1, 1, 2, 3, 4], np.int32),
                       "mode": "replicate"}),
    ("reverse", "iOS18", {"x": X, "axes": np.array([0, -1], np.int32)}),
    ("reverse", "iOS18", {"x": I32}),
    ("fill", "iOS18", {"shape": np.array([2, 3], np.int32), "value": 1.5}),
    ("fill", "iOS18", {"shape": np.array([2, 3], np.int32), "value": np.int32(4)}),
    ("fill_like", "iOS18", {"ref_tensor": X, "value": np.int32(7)}),
    ("range_1d", "iOS18", {"start": 1.0, "end": 4.0, "step": 0.5}),
    ("range_1d", "iOS18", {"start": np.int32(10), "end": np.int32(-3), "step": np.int32(-4)}),
    ("shape", "iOS18", {"x": X}),
    ("band_part", "iOS18", {"x": X, "lower": 1, "upper": 0}),
    ("band_part", "iOS18", {"x": X, "lower": -1, "upper": 2}),
    ("non_zero", "iOS18", {"x": np.array([[0, 1.5], [2, 0], [3, 4]], np.float32)}),
    ("cast", "iOS18", {"x": np.array([-1.7, 0.0, 2.9], np.float32), "dtype": "int32"}),
    ("cast", "iOS18", {"x": np.array([-1.7, 0.0, 2.9], np.float32), "dtype": "bool"}),
    ("cast", "iOS18", {"x": np.array([3, 0, -2], np.int32), "dtype": "fp32"}),
    ("select", "iOS18", {"cond": X > 0, "a": X, "b": np.float32(0.0)}),
]


@pytest.mark.parametrize(
    "op_type, opset, inputs",
    VALUE_INFERENCE_CASES,
    ids=[f"{c[0]}-{i}" for i, c in enumerate(VALUE_INFERENCE_CASES)],
)
def test_kernel_matches_coremltools_value_inference(op_type, opset, inputs):
    op = build_op(op_type, opset, **inputs)
    expected = inferred_outputs(op)
    got = run_kernel(op)
    assert len(got) == len(expected)
    for ours, theirs in zip(got, expected, strict=True):
        assert theirs is not None, f"coremltools has no value for {op_type}"
        ours, theirs = np.asarray(ours), np.asarray(theirs)
        assert ours.shape == theirs.shape
        assert ours.dtype.kind == theirs.dtype.kind
        np.testing.assert_allclose(ours.astype(np.float64), theirs.astype(np.float64), rtol=1e-6)


def test_concat_interleave():
    a = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    b = a + 6
    (out,) = run_kernel(build_op("concat", "iOS18", values=[a, b], axis=0, interleave=True))
    np.testing.assert_array_equal(out, [[1, 2], [7, 8], [3, 4], [9, 10], [5, 6], [11, 12]])


def test_flatten2d_axis_zero_gives_leading_one():
    # coremltools' own value inference crashes here (np.prod([]) is a float), so the
    # kernel is called bare
    out = get_kernel("flatten2d")(KernelContext(), x=X, axis=np.int32(0))
    assert out.shape == (1, 24)


@pytest.mark.parametrize("axis, size, stride", [(2, 2, 2), (-2, 2, 1), (0, 1, 1)])
def test_sliding_windows_puts_window_after_axis(axis, size, stride):
    (out,) = run_kernel(build_op("sliding_windows", "iOS18", x=X, axis=axis, size=size,
                                 stride=stride))
    ax = axis % X.ndim
    count = (X.shape[ax] - size) // stride + 1
    assert out.shape == (*X.shape[:ax], count, size, *X.shape[ax + 1 :])
    for w in range(count):
        window = np.take(out, w, axis=ax)
        expected = np.take(X, np.arange(w * stride, w * stride + size), axis=ax)
        np.testing.assert_array_equal(window, expected)


def test_one_hot_axis_and_values():
    indices = np.array([[0, 2], [1, 5]], np.int32)
    op = build_op("one_hot", "iOS18", indices=indices, one_hot_vector_size=3, axis=1,
                  on_value=np.float32(2.0), off_value=np.float32(-1.0))
    (out,) = run_kernel(op)
    assert out.shape == (2, 3, 2)
    expected = np.where(np.arange(3)[None, :, None] == indices[:, None, :], 2.0, -1.0)
    np.testing.assert_array_equal(out, expected)


def test_reverse_sequence_reverses_prefix_per_batch():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    op = build_op("reverse_sequence", "iOS18", x=x, lengths=np.array([1, 2, 4], np.int32),
                  seq_axis=1, batch_axis=0)
    (out,) = run_kernel(op)
    np.testing.assert_array_equal(out, [[0, 1, 2, 3], [5, 4, 6, 7], [11, 10, 9, 8]])


def test_reshape_like_takes_shape_from_references():
    op = build_op("reshape_like", "iOS18", x=np.arange(20, dtype=np.float32),
                  ref_tensors=(np.zeros((2, 3, 4), np.float32), np.zeros((1, 5, 2), np.float32)),
                  begins=(0, 1), ends=(1, 0), end_masks=(False, True))
    (out,) = run_kernel(op)
    assert out.shape == (2, 5, 2)


torch = pytest.importorskip("torch")


@pytest.mark.parametrize("factor", [2, 3])
def test_pixel_shuffle_and_unshuffle_match_torch(factor):
    x = RNG.standard_normal((2, 2 * factor * factor, 3, 4)).astype(np.float32)
    (out,) = run_kernel(build_op("pixel_shuffle", "iOS18", x=x, upscale_factor=factor))
    np.testing.assert_array_equal(out, torch.nn.functional.pixel_shuffle(torch.tensor(x), factor))
    (back,) = run_kernel(build_op("pixel_unshuffle", "iOS18", x=out.astype(np.float32),
                                  downscale_factor=np.uint32(factor)))
    np.testing.assert_array_equal(back, x)


def test_depth_to_space_is_dcr_and_inverts_space_to_depth():
    x = np.arange(2 * 8 * 2 * 3, dtype=np.float32).reshape(2, 8, 2, 3)
    (d2s,) = run_kernel(build_op("depth_to_space", "iOS18", x=x, block_size=2))
    # TensorFlow DCR: out[n, c, h*bs+i, w*bs+j] = x[n, (i*bs+j)*C + c, h, w]
    assert d2s[1, 1, 3, 4] == x[1, (1 * 2 + 0) * 2 + 1, 1, 2]
    (s2d,) = run_kernel(build_op("space_to_depth", "iOS18", x=d2s.astype(np.float32), block_size=2))
    np.testing.assert_array_equal(s2d, x)


def test_space_to_batch_round_trip_and_layout():
    x = RNG.standard_normal((2, 3, 4, 6)).astype(np.float32)
    op = build_op("space_to_batch", "iOS18", x=x, block_shape=np.array([2, 3], np.int32),
                  paddings=np.array([[1, 1], [0, 0]], np.int32))
    (s2b,) = run_kernel(op)
    assert s2b.shape == (12, 3, 3, 2)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (0, 0)))
    # batch index (i * bw + j) * n + b holds padded[b, :, i::bh, j::bw]
    np.testing.assert_array_equal(s2b[(1 * 3 + 2) * 2 + 1], padded[1, :, 1::2, 2::3])
    back_op = build_op("batch_to_space", "iOS18", x=s2b.astype(np.float32),
                       block_shape=np.array([2, 3], np.int32),
                       crops=np.array([[1, 1], [0, 0]], np.int32))
    (back,) = run_kernel(back_op)
    np.testing.assert_array_equal(back, x)


def test_fp16_range_past_the_fp16_maximum_rounds_to_inf():
    """coremltools' ``TestRange1d::test_large_array`` (0 to 2e6): sized by the op's declared
    length, each value rounded to fp16, so the tail past 65504 is inf rather than an error."""
    op = build_op("range_1d", "iOS15", start=0.0, end=2000000.0, step=1.0)
    (got,) = run_kernel(op, dtype=np.float16)
    assert got.shape == (2000000,) and got.dtype == np.float16
    assert got[2048] == 2048 and got[65504] == 65504 and np.isinf(got[-1])
    assert np.isinf(got).sum() == 2000000 - 65520  # 65520 rounds to inf, 65519 to 65504

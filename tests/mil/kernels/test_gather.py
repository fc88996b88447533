"""Gather/scatter kernels against coremltools' value inference and explicit loops."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from nebisect.mil.kernels import KernelContext, get_kernel
from nebisect.mil.single_op import build_op, inferred_outputs, run_kernel

RNG = np.random.default_rng(3)
X = RNG.standard_normal((3, 4, 5)).astype(np.float32)


@pytest.mark.parametrize(
    "inputs, opset",
    [
        ({"x": X, "indices": np.array([2, 0, -1], np.int32), "axis": 1}, "iOS15"),
        ({"x": X, "indices": np.array([[1, 0], [2, 2]], np.int32), "axis": -1}, "iOS15"),
        ({"x": X, "indices": np.int32(1), "axis": 0}, "iOS15"),
        ({"x": X, "indices": np.array([[0, 3], [1, 1], [2, 0]], np.int32), "axis": 1,
          "batch_dims": 1}, "iOS16"),
    ],
)
def test_gather_matches_value_inference(inputs, opset):
    op = build_op("gather", opset, **inputs)
    (out,) = run_kernel(op)
    np.testing.assert_array_equal(out, inferred_outputs(op)[0])


def test_gather_along_axis_matches_value_inference():
    indices = RNG.integers(0, 4, size=(3, 2, 5)).astype(np.int32)
    op = build_op("gather_along_axis", "iOS17", x=X, indices=indices, axis=1)
    (out,) = run_kernel(op)
    np.testing.assert_array_equal(out, inferred_outputs(op)[0])


def test_gather_nd_with_and_without_batch_dims():
    indices = np.array([[[0, 1], [2, 3]], [[1, 0], [0, 3]]], np.int32)  # [2, 2, 2]
    (out,) = run_kernel(build_op("gather_nd", "iOS16", x=X, indices=indices))
    assert out.shape == (2, 2, 5)
    np.testing.assert_array_equal(out[1, 1], X[0, 3])
    batched = np.array([[[1], [3]], [[0], [0]], [[2], [1]]], np.int32)  # [3, 2, 1]
    (out,) = run_kernel(build_op("gather_nd", "iOS16", x=X, indices=batched, batch_dims=1))
    assert out.shape == (3, 2, 5)
    np.testing.assert_array_equal(out[2, 1], X[2, 1])


def _reference_scatter(data, updates, targets, mode):
    """Apply (target index, update) pairs one by one, the MIL definition."""
    ops = {
        "update": lambda a, b: b, "add": np.add, "sub": np.subtract, "mul": np.multiply,
        "div": np.divide, "max": np.maximum, "min": np.minimum,
    }
    out = data.astype(np.float64).copy()
    for target, value in zip(targets, updates, strict=True):
        out[target] = ops[mode](out[target], value)
    return out


MODES = ["update", "add", "sub", "mul", "div", "max", "min"]


@pytest.mark.parametrize("mode", MODES)
def test_scatter_applies_mode_with_duplicates(mode):
    data = RNG.standard_normal((4, 3)).astype(np.float32)
    indices = np.array([1, 3, 1], np.int32)
    updates = RNG.uniform(0.5, 2.0, size=(3, 3)).astype(np.float32)
    op = build_op("scatter", "iOS17", data=data, indices=indices, updates=updates, axis=0,
                  mode=mode)
    (out,) = run_kernel(op)
    expected = _reference_scatter(data, updates, [1, 3, 1], mode)
    np.testing.assert_allclose(out, expected, rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_scatter_nd_applies_mode(mode):
    data = RNG.standard_normal((3, 4, 2)).astype(np.float32)
    indices = np.array([[0, 1], [2, 3], [0, 1]], np.int32)
    updates = RNG.uniform(0.5, 2.0, size=(3, 2)).astype(np.float32)
    (out,) = run_kernel(build_op("scatter_nd", "iOS17", data=data, indices=indices,
                                 updates=updates, mode=mode))
    expected = _reference_scatter(data, updates, [(0, 1), (2, 3), (0, 1)], mode)
    np.testing.assert_allclose(out, expected, rtol=1e-12)


@pytest.mark.parametrize("mode", MODES)
def test_scatter_along_axis_applies_mode(mode):
    data = RNG.standard_normal((2, 4)).astype(np.float32)
    indices = np.array([[3, 0, 3], [1, 1, 2]], np.int32)
    updates = RNG.uniform(0.5, 2.0, size=(2, 3)).astype(np.float32)
    (out,) = run_kernel(build_op("scatter_along_axis", "iOS17", data=data, indices=indices,
                                 updates=updates, axis=1, mode=mode))
    targets = [(r, int(indices[r, c])) for r, c in itertools.product(range(2), range(3))]
    expected = _reference_scatter(data, updates.reshape(-1), targets, mode)
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_scatter_slices_along_middle_axis_with_matrix_indices():
    data = np.zeros((2, 5, 3), np.float32)
    indices = np.array([[4, 0], [2, 1]], np.int32)
    updates = RNG.standard_normal((2, 2, 2, 3)).astype(np.float32)
    (out,) = run_kernel(build_op("scatter", "iOS17", data=data, indices=indices,
                                 updates=updates, axis=1, mode="update"))
    np.testing.assert_array_equal(out[:, 4], updates[:, 0, 0])
    np.testing.assert_array_equal(out[:, 1], updates[:, 1, 1])
    np.testing.assert_array_equal(out[:, 3], 0)


def test_scatter_int_division_floors():
    data = np.array([7, -7, 9], np.int32)
    (out,) = run_kernel(build_op("scatter", "iOS17", data=data, indices=np.array([0, 1], np.int32),
                                 updates=np.array([2, 2], np.int32), mode="div"))
    np.testing.assert_array_equal(out, [3, -4, 9])
    assert out.dtype == np.int32


def test_iOS15_scatter_counts_negative_indices_from_the_end():
    data = np.zeros((3, 2), np.float32)
    (out,) = run_kernel(build_op("scatter", "iOS15", data=data, indices=np.array([-1], np.int32),
                                 updates=np.ones((1, 2), np.float32), mode="update"))
    np.testing.assert_array_equal(out, [[0, 0], [0, 0], [1, 1]])


@pytest.mark.parametrize("indices", [[10, 0], [-1, 0]])
def test_iOS17_scatter_out_of_bounds_fails_like_the_device_or_is_dropped(indices):
    from nebisect.mil.interp import SimPredictError

    data = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    updates = np.array([[5, 6, 7], [8, 9, 10]], np.float32)
    op = build_op("scatter", "iOS17", data=data, indices=np.array([0, 1], np.int32),
                  updates=updates, validate_indices=True)
    args = {"data": data, "indices": np.array(indices, np.int32), "updates": updates,
            "axis": np.int32(0), "mode": "add"}
    fn = get_kernel("scatter")
    with pytest.raises(SimPredictError, match="Unable to compute the prediction"):
        fn(KernelContext(op=op), validate_indices=np.bool_(True), **args)
    dropped = fn(KernelContext(op=op), validate_indices=np.bool_(False), **args)
    np.testing.assert_array_equal(dropped, [[9, 11, 13], [4, 5, 6]])

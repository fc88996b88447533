"""cumsum / topk / argsort kernels."""

from __future__ import annotations

import numpy as np
import pytest

from nebisect.mil.kernels import KernelContext, get_kernel
from nebisect.mil.single_op import build_op, inferred_outputs, run_kernel

RNG = np.random.default_rng(17)
X = RNG.standard_normal((3, 5)).astype(np.float32)


@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_modes(axis, exclusive, reverse):
    # called bare: coremltools' own cumsum value inference crashes on exclusive=True
    out = get_kernel("cumsum")(KernelContext(), x=X.astype(np.float64), axis=np.int32(axis),
                               exclusive=np.bool_(exclusive), reverse=np.bool_(reverse))
    data = np.flip(X, axis) if reverse else X
    expected = np.cumsum(data.astype(np.float64), axis=axis)
    if exclusive:
        expected = expected - data
    expected = np.flip(expected, axis) if reverse else expected
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)


def test_cumsum_int_stays_int():
    out = get_kernel("cumsum")(KernelContext(), x=np.array([1, 2, 3], np.int32),
                               axis=np.int32(0), exclusive=np.bool_(True), reverse=None)
    np.testing.assert_array_equal(out, [0, 1, 3])
    assert out.dtype.kind == "i"


@pytest.mark.parametrize("ascending", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
def test_topk_matches_value_inference(ascending, axis):
    op = build_op("topk", "iOS15", x=X, k=2, axis=axis, ascending=ascending)
    values, indices = run_kernel(op)
    want_values, want_indices = inferred_outputs(op)
    np.testing.assert_array_equal(values, want_values)
    np.testing.assert_array_equal(indices, want_indices)
    assert indices.dtype == np.int32


def test_topk_iOS17_all_elements_without_indices():
    op = build_op("topk", "iOS17", x=X, k=-1, return_indices=False)
    (values,) = run_kernel(op)
    np.testing.assert_array_equal(values, -np.sort(-X, axis=-1))


def test_topk_ties_keep_input_order():
    x = np.array([[1.0, 3.0, 3.0, 1.0]], np.float32)
    _, indices = run_kernel(build_op("topk", "iOS16", x=x, k=3))
    np.testing.assert_array_equal(indices, [[1, 2, 0]])


@pytest.mark.parametrize("ascending", [False, True])
def test_argsort_matches_value_inference(ascending):
    op = build_op("argsort", "iOS17", x=X, axis=0, ascending=ascending)
    (out,) = run_kernel(op)
    np.testing.assert_array_equal(out, inferred_outputs(op)[0])

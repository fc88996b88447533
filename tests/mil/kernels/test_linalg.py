"""matmul / linear / einsum kernels, including the naive fp16-accumulator variant."""

from __future__ import annotations

import numpy as np
import pytest

from nebisect.mil.kernels import KernelContext, get_kernel
from nebisect.mil.single_op import build_op, inferred_outputs, run_kernel

RNG = np.random.default_rng(11)


def _f(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize(
    "x, y, tx, ty",
    [
        (_f(4, 3), _f(3, 2), False, False),
        (_f(3, 4), _f(3, 2), True, False),
        (_f(10, 4, 3), _f(5, 1, 2, 3), False, True),
        (_f(4), _f(2, 4, 3), False, False),
    ],
)
def test_matmul_matches_value_inference(x, y, tx, ty):
    op = build_op("matmul", "iOS17", x=x, y=y, transpose_x=tx, transpose_y=ty)
    (out,) = run_kernel(op)
    expected = inferred_outputs(op)[0]
    assert np.shape(out) == np.shape(expected)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_linear_matches_value_inference():
    op = build_op("linear", "iOS17", x=_f(2, 5, 3), weight=_f(4, 3), bias=_f(4))
    (out,) = run_kernel(op)
    np.testing.assert_allclose(out, inferred_outputs(op)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "equation, shapes",
    [
        ("nchw,nwhu->nchu", [(2, 3, 4, 5), (1, 5, 4, 6)]),
        ("chw,whr->chr", [(3, 1, 5), (5, 4, 2)]),
    ],
)
def test_einsum_matches_value_inference(equation, shapes):
    op = build_op("einsum", "iOS17", values=tuple(_f(*s) for s in shapes), equation=equation)
    (out,) = run_kernel(op)
    np.testing.assert_allclose(out, inferred_outputs(op)[0], rtol=1e-5, atol=1e-6)


def test_naive_matmul_accumulates_in_fp16_and_saturates():
    """fp16 running sums stall at 2048 + 1 == 2048; numpy's matmul accumulates in fp32."""
    x = np.ones((1, 4096), np.float16)
    y = np.ones((4096, 1), np.float16)
    op = build_op("matmul", "iOS17", x=x, y=y)
    (careful,) = run_kernel(op, dtype=np.float16)
    (naive,) = run_kernel(op, dtype=np.float16, variants=("naive",))
    assert careful.item() == 4096.0
    assert naive.item() == 2048.0


def test_naive_matmul_equals_matmul_in_float64():
    x, y = _f(3, 2, 5), _f(5, 4)
    op = build_op("linear", "iOS17", x=x, weight=y.T.copy(), bias=_f(4))
    (careful,) = run_kernel(op)
    (naive,) = run_kernel(op, variants=("naive",))
    np.testing.assert_allclose(naive, careful, rtol=1e-12)


def test_linear_adds_its_bias_to_the_product_as_a_separate_float32_sum():
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((2, 5, 7), np.float32), rng.standard_normal((3, 7), np.float32)
    bias = rng.standard_normal(3, np.float32)
    linear = get_kernel("linear")
    got = linear(KernelContext(dtype=np.float32), x=x, weight=w, bias=bias)
    np.testing.assert_array_equal(got.view(np.uint32), (np.matmul(x, w.T) + bias).view(np.uint32))
    wide = linear(KernelContext(dtype=np.float32), x=x, weight=w, bias=bias.astype(np.float64))
    assert wide.dtype == np.float64  # a wider bias widens the sum, never rounds into the product

"""Elementwise, activation, reduction and softmax kernels against coremltools' own value
inference (the op definitions) and against torch; naive variants against fp16 hazards."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nebisect.mil.kernels import KernelContext, get_kernel
from nebisect.mil.kernels.special import erf
from nebisect.mil.single_op import build_op, inferred_outputs, run_kernel

RNG = np.random.default_rng(11)
X = RNG.standard_normal((2, 3, 4)).astype(np.float32) * 3
Y = RNG.standard_normal((2, 3, 4)).astype(np.float32) * 3
UNIT = np.tanh(X) * 0.99  # inside (-1, 1) for acos / asin / atanh
POS = np.abs(X) + 0.5
I32 = np.array([[-7, -3, 0, 2, 9]], np.int32)
J32 = np.array([[2, -2, 3, -4, 4]], np.int32)
HALVES = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.4, -0.6], np.float32)
BOOL_A = np.array([True, False, True, False])
BOOL_B = np.array([True, True, False, False])
C4 = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
CH = np.array([0.5, -1.0, 2.0], np.float32)

UNARY = [
    "abs", "ceil", "cos", "cosh", "exp", "exp2", "floor", "sign", "sin", "sinh", "square",
    "tan", "tanh", "erf", "relu", "relu6", "sigmoid", "softplus", "softsign",
]

CASES = [(op, "iOS18", {"x": X}) for op in UNARY] + [
    ("acos", "iOS18", {"x": UNIT}),
    ("asin", "iOS18", {"x": UNIT}),
    ("atan", "iOS18", {"x": X}),
    ("atanh", "iOS18", {"x": UNIT}),
    ("sqrt", "iOS18", {"x": POS}),
    ("round", "iOS18", {"x": HALVES}),
    ("abs", "iOS18", {"x": I32}),
    ("sign", "iOS18", {"x": I32}),
    ("square", "iOS18", {"x": I32}),
    ("inverse", "iOS18", {"x": POS}),
    ("inverse", "iOS18", {"x": POS, "epsilon": np.float32(0.5)}),
    ("log", "iOS18", {"x": POS}),
    ("log", "iOS18", {"x": POS, "epsilon": np.float32(1.0)}),
    ("rsqrt", "iOS18", {"x": POS}),
    ("clip", "iOS18", {"x": X, "alpha": np.float32(-1.0), "beta": np.float32(2.0)}),
    ("threshold", "iOS18", {"x": X, "alpha": np.float32(0.7)}),
    ("logical_not", "iOS18", {"x": BOOL_A}),
    ("add", "iOS18", {"x": X, "y": Y}),
    ("sub", "iOS18", {"x": X, "y": Y[:1]}),
    ("mul", "iOS18", {"x": X, "y": np.float32(2.5)}),
    ("real_div", "iOS18", {"x": X, "y": POS}),
    ("floor_div", "iOS18", {"x": X, "y": POS}),
    ("floor_div", "iOS18", {"x": I32, "y": J32}),
    ("mod", "iOS18", {"x": X, "y": POS}),
    ("mod", "iOS18", {"x": I32, "y": J32}),
    ("pow", "iOS18", {"x": POS, "y": Y}),
    ("maximum", "iOS18", {"x": X, "y": Y}),
    ("minimum", "iOS18", {"x": I32, "y": J32}),
    ("equal", "iOS18", {"x": I32, "y": J32}),
    ("not_equal", "iOS18", {"x": X, "y": X * (X > 0)}),
    ("greater", "iOS18", {"x": X, "y": Y}),
    ("greater_equal", "iOS18", {"x": X, "y": X * (X > 0)}),
    ("less", "iOS18", {"x": X, "y": Y}),
    ("less_equal", "iOS18", {"x": I32, "y": J32}),
    ("logical_and", "iOS18", {"x": BOOL_A, "y": BOOL_B}),
    ("logical_or", "iOS18", {"x": BOOL_A, "y": BOOL_B}),
    ("logical_xor", "iOS18", {"x": BOOL_A, "y": BOOL_B}),
    ("gelu", "iOS18", {"x": X, "mode": "EXACT"}),
    ("gelu", "iOS18", {"x": X, "mode": "TANH_APPROXIMATION"}),
    ("gelu", "iOS18", {"x": X, "mode": "SIGMOID_APPROXIMATION"}),
    ("sigmoid_hard", "iOS18", {"x": X, "alpha": np.float32(0.2), "beta": np.float32(0.5)}),
    ("scaled_tanh", "iOS18", {"x": X, "alpha": np.float32(1.5), "beta": np.float32(0.5)}),
    ("elu", "iOS18", {"x": X, "alpha": np.float32(0.7)}),
    ("leaky_relu", "iOS18", {"x": X, "alpha": np.float32(0.1)}),
    ("linear_activation", "iOS18", {"x": X, "alpha": np.float32(2.0), "beta": np.float32(-1.0)}),
    ("clamped_relu", "iOS18", {"x": X, "alpha": np.float32(0.1), "beta": np.float32(2.0)}),
    ("thresholded_relu", "iOS18", {"x": X, "alpha": np.float32(0.5)}),
    ("prelu", "iOS18", {"x": C4[:, :3], "alpha": CH}),
    ("softplus_parametric", "iOS18", {"x": C4[:, :3], "alpha": CH, "beta": np.abs(CH)}),
    ("softmax", "iOS18", {"x": X, "axis": 1}),
    ("softmax", "iOS18", {"x": X}),
]

for _op in ("reduce_sum", "reduce_mean", "reduce_prod", "reduce_max", "reduce_min",
            "reduce_l1_norm", "reduce_l2_norm", "reduce_sum_square", "reduce_log_sum_exp"):
    CASES += [
        (_op, "iOS18", {"x": C4, "axes": np.array([1], np.int32), "keep_dims": True}),
        (_op, "iOS18", {"x": C4, "axes": np.array([-1, 0], np.int32)}),
        (_op, "iOS18", {"x": C4}),
    ]
CASES += [
    ("reduce_log_sum", "iOS18", {"x": np.abs(C4) + 0.1, "axes": np.array([2], np.int32)}),
    ("reduce_sum", "iOS18", {"x": I32, "axes": np.array([1], np.int32)}),
    ("reduce_max", "iOS18", {"x": I32}),
    ("reduce_argmax", "iOS18", {"x": C4, "axis": 2}),
    ("reduce_argmax", "iOS18", {"x": C4, "axis": -1, "keep_dims": True}),
    ("reduce_argmin", "iOS18", {"x": C4, "axis": 0}),
    ("reduce_argmin", "iOS18", {"x": I32}),
]


@pytest.mark.parametrize(
    "op_type, opset, inputs", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)]
)
def test_kernel_matches_coremltools_value_inference(op_type, opset, inputs):
    op = build_op(op_type, opset, **inputs)
    (expected,) = inferred_outputs(op)
    assert expected is not None, f"coremltools has no value for {op_type}"
    (ours,) = run_kernel(op)
    ours, expected = np.asarray(ours), np.asarray(expected)
    assert ours.shape == expected.shape
    if expected.dtype.kind in "biu":
        np.testing.assert_array_equal(ours, expected)
    else:
        np.testing.assert_allclose(ours, expected.astype(np.float64), rtol=2e-6, atol=1e-6)


def _ctx(dtype=np.float64, variant=""):
    return KernelContext(dtype=dtype, variant=variant)


WIDE = np.linspace(-30, 30, 241)


@pytest.mark.parametrize(
    "mode, reference",
    [
        ("EXACT", lambda t: torch.nn.functional.gelu(t)),
        ("TANH_APPROXIMATION", lambda t: torch.nn.functional.gelu(t, approximate="tanh")),
        ("SIGMOID_APPROXIMATION", lambda t: t * torch.sigmoid(1.702 * t)),
    ],
)
def test_gelu_modes_match_torch_in_fp64_and_fp32(mode, reference):
    expected = reference(torch.from_numpy(WIDE)).numpy()
    np.testing.assert_allclose(get_kernel("gelu")(_ctx(), x=WIDE, mode=mode), expected,
                               rtol=1e-13, atol=1e-14)
    got32 = get_kernel("gelu")(_ctx(np.float32), x=WIDE.astype(np.float32), mode=mode)
    assert got32.dtype == np.float32
    np.testing.assert_allclose(got32, expected, rtol=2e-6, atol=2e-6)


def test_erf_is_double_accurate_and_float_fast_path_is_close():
    xs = np.concatenate([np.linspace(-7, 7, 4001), [0.0, 3.0, -6.0, np.inf, -np.inf]])
    expected = torch.erf(torch.from_numpy(xs)).numpy()
    np.testing.assert_allclose(erf(xs), expected, rtol=0, atol=2e-15)
    np.testing.assert_allclose(erf(xs.astype(np.float32)), expected, rtol=0, atol=1e-6)
    assert np.isnan(erf(np.array([np.nan]))[0])


@pytest.mark.parametrize("threads", ["1", "2"])
def test_float32_exact_gelu_is_its_formula_bit_for_bit_over_many_blocks(monkeypatch, threads):
    """The blockwise gelu computes each element by the formula's float32 operations."""
    monkeypatch.setenv("OMP_NUM_THREADS", threads)
    x = (np.random.default_rng(11).standard_normal((3, 70_001)) * 5).astype(np.float32)
    x[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    half, one = np.float32(0.5), np.float32(1)
    with np.errstate(all="ignore"):
        formula = half * x * (one + erf(x * np.float32(1.0 / np.sqrt(2.0))))
        got = get_kernel("gelu")(KernelContext(dtype=np.float32), x=x, mode="EXACT")
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_array_equal(got.view(np.uint32), formula.view(np.uint32))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_careful_softplus_sigmoid_silu_never_overflow(dtype):
    xs = np.array([-1000, -100, -20, 0, 20, 100, 1000], dtype)
    t = torch.from_numpy(xs.astype(np.float64))
    for op, ref in (("softplus", torch.nn.functional.softplus), ("sigmoid", torch.sigmoid),
                    ("silu", torch.nn.functional.silu)):
        got = get_kernel(op)(_ctx(dtype), x=xs)
        assert np.all(np.isfinite(got)), op
        np.testing.assert_allclose(got, ref(t).numpy(), rtol=1e-6, atol=1e-30)


def test_careful_logsumexp_softmax_l2norm_match_torch_at_large_values():
    big = np.array([[1000.0, 999.0, -5.0], [-1000.0, -1001.0, -1002.0]])
    t = torch.from_numpy(big)
    lse = get_kernel("reduce_log_sum_exp")(_ctx(), x=big, axes=np.array([1]), keep_dims=False)
    np.testing.assert_allclose(lse, torch.logsumexp(t, 1).numpy(), rtol=1e-15)
    sm = get_kernel("softmax")(_ctx(np.float32), x=big.astype(np.float32), axis=-1)
    np.testing.assert_allclose(sm, torch.softmax(t, -1).numpy(), rtol=1e-6, atol=1e-30)
    huge = np.array([3e30, 4e30], np.float32)
    norm = get_kernel("reduce_l2_norm")(_ctx(np.float32), x=huge, axes=None, keep_dims=False)
    np.testing.assert_allclose(norm, 5e30, rtol=1e-6)


def test_softmax_of_all_minus_inf_row_is_nan_like_torch():
    row = np.full((1, 3), -np.inf)
    got = get_kernel("softmax")(_ctx(), x=row, axis=-1)
    assert np.all(np.isnan(got))
    assert np.all(np.isnan(torch.softmax(torch.from_numpy(row), -1).numpy()))


@pytest.mark.parametrize("op", ["reduce_sum", "reduce_max", "reduce_min", "reduce_mean",
                                "reduce_log_sum_exp", "reduce_l2_norm", "reduce_prod"])
@pytest.mark.parametrize("variant", ["", "naive"])
def test_reductions_propagate_nan(op, variant):
    x = np.array([[1.0, np.nan, 3.0], [1.0, 2.0, 3.0]], np.float16)
    got = get_kernel(op, (variant,))(_ctx(np.float16, variant), x=x, axes=np.array([1]),
                                      keep_dims=False)
    assert np.isnan(got[0]) and np.isfinite(got[1])


def test_naive_sum_accumulates_in_fp16_careful_sum_does_not():
    ones = np.ones((1, 3000), np.float16)
    careful = get_kernel("reduce_sum")(_ctx(np.float32), x=ones.astype(np.float32),
                                       axes=np.array([1]), keep_dims=False)
    naive = get_kernel("reduce_sum", ("naive",))(_ctx(np.float16, "naive"), x=ones,
                                                 axes=np.array([1]), keep_dims=False)
    assert careful[0] == 3000
    assert naive[0] == 2048  # 2048 + 1 rounds back to 2048 in fp16
    mean = get_kernel("reduce_mean", ("naive",))(_ctx(np.float16, "naive"), x=ones,
                                                  axes=None, keep_dims=True)
    assert mean.shape == (1, 1) and mean.dtype == np.float16
    assert float(mean[0, 0]) == pytest.approx(2048 / 3000, rel=1e-3)


def test_naive_softmax_and_logsumexp_overflow_in_fp16():
    logits = np.array([[12.0, 0.0, -1.0]], np.float16)
    careful = get_kernel("softmax")(_ctx(np.float32), x=logits.astype(np.float32), axis=-1)
    assert np.all(np.isfinite(careful))
    naive = get_kernel("softmax", ("naive",))(_ctx(np.float16, "naive"), x=logits, axis=-1)
    assert np.isnan(naive[0, 0])
    lse = get_kernel("reduce_log_sum_exp", ("naive",))(_ctx(np.float16, "naive"), x=logits,
                                                        axes=None, keep_dims=False)
    assert np.isinf(lse)


def test_naive_softplus_overflows_past_log_fp16_max():
    x = np.array([11.0, 11.1], np.float16)
    naive = get_kernel("softplus", ("naive",))(_ctx(np.float16, "naive"), x=x)
    assert np.isfinite(naive[0]) and np.isinf(naive[1])
    assert np.all(np.isfinite(get_kernel("softplus")(_ctx(np.float32), x=x.astype(np.float32))))


NAIVE_OPS = ["sigmoid", "silu", "softplus", "softmax", "reduce_sum", "reduce_mean",
             "reduce_prod", "reduce_sum_square", "reduce_l1_norm", "reduce_l2_norm",
             "reduce_log_sum", "reduce_log_sum_exp"]


@pytest.mark.parametrize("op", NAIVE_OPS)
def test_naive_variants_exist_and_compute_in_fp16(op):
    fn = get_kernel(op, ("naive",))
    assert fn is not get_kernel(op)
    x = np.abs(RNG.standard_normal((3, 4))).astype(np.float16) + np.float16(0.5)
    extra = {"softmax": {"axis": 1}}.get(op, {"axes": None} if op.startswith("reduce") else {})
    out = np.asarray(fn(_ctx(np.float16, "naive"), x=x, **extra))
    assert out.dtype == np.float16


@pytest.mark.parametrize("op_type, opset, inputs",
                         [c for c in CASES if c[2]["x"].dtype == np.float32],
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)
                              if c[2]["x"].dtype == np.float32])
def test_float16_compute_stays_float16(op_type, opset, inputs):
    """Kernels compute in the dtype they are given (no silent float64 promotion)."""
    op = build_op(op_type, opset, **inputs)
    (out,) = run_kernel(op, np.float16)
    if np.asarray(out).dtype.kind == "f":
        assert np.asarray(out).dtype == np.float16, op_type


def test_integer_real_div_truncates_and_pow_negative_exponent_is_float():
    sevens, twos = np.array([7, -7], np.int32), np.array([2, 2], np.int32)
    got = get_kernel("real_div")(_ctx(), x=sevens, y=twos)
    np.testing.assert_array_equal(got, [3, -3])
    got = get_kernel("pow")(_ctx(), x=np.array([2], np.int32), y=np.array([-1], np.int32))
    np.testing.assert_array_equal(got, [0.5])


def test_mixed_int_float_binary_promotes_to_compute_dtype():
    got = get_kernel("add")(_ctx(np.float16), x=np.array([1, 2], np.int32),
                            y=np.array([0.5, 0.25], np.float16))
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, [1.5, 2.25])

"""Normalization kernels against coremltools' value inference and torch."""

from __future__ import annotations

import numpy as np
import pytest

from nebisect.mil.kernels import KernelContext, get_kernel
from nebisect.mil.single_op import build_op, inferred_outputs, run_kernel

torch = pytest.importorskip("torch")
F = torch.nn.functional
RNG = np.random.default_rng(13)
X = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)


def _t(a):
    return torch.tensor(np.asarray(a), dtype=torch.float64)


@pytest.mark.parametrize("axes", [[-1], [2, 3], [1, 2, 3]])
def test_layer_norm_matches_value_inference(axes):
    shape = [X.shape[a] for a in axes]
    op = build_op("layer_norm", "iOS17", x=X, axes=np.array(axes, np.int32),
                  gamma=RNG.standard_normal(shape).astype(np.float32),
                  beta=RNG.standard_normal(shape).astype(np.float32), epsilon=np.float32(1e-3))
    (out,) = run_kernel(op)
    np.testing.assert_allclose(out, inferred_outputs(op)[0], rtol=1e-5, atol=1e-5)


def test_layer_norm_without_axes_normalizes_everything():
    # called bare: coremltools cannot build layer_norm's default axes as a constant
    out = get_kernel("layer_norm")(KernelContext(), x=X.astype(np.float64), axes=None,
                                   gamma=None, beta=None, epsilon=None)
    assert abs(out.mean()) < 1e-12
    assert abs(out.var() - 1.0) < 1e-3


def test_batch_norm_matches_torch():
    mean, var = RNG.standard_normal(3), RNG.uniform(0.5, 2.0, 3)
    gamma, beta = RNG.standard_normal(3), RNG.standard_normal(3)
    op = build_op("batch_norm", "iOS17", x=X, mean=mean.astype(np.float32),
                  variance=var.astype(np.float32), gamma=gamma.astype(np.float32),
                  beta=beta.astype(np.float32), epsilon=np.float32(1e-4))
    (out,) = run_kernel(op)
    f32 = [np.float32(v).astype(np.float64) for v in (mean, var, gamma, beta)]
    expected = F.batch_norm(_t(X), *(_t(v) for v in f32[:2]), weight=_t(f32[2]),
                            bias=_t(f32[3]), eps=float(np.float32(1e-4)))
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-10, atol=1e-10)


def test_instance_norm_matches_torch():
    gamma, beta = RNG.standard_normal(3).astype(np.float32), RNG.standard_normal(3).astype(
        np.float32)
    op = build_op("instance_norm", "iOS17", x=X, gamma=gamma, beta=beta, epsilon=np.float32(1e-5))
    (out,) = run_kernel(op)
    expected = F.instance_norm(_t(X), weight=_t(gamma), bias=_t(beta),
                               eps=float(np.float32(1e-5)))
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 3, 4, 5), (2, 2, 3, 4, 5)])
def test_l2_norm_matches_value_inference(shape):
    op = build_op("l2_norm", "iOS17", x=RNG.standard_normal(shape).astype(np.float32))
    (out,) = run_kernel(op)
    np.testing.assert_allclose(out, inferred_outputs(op)[0], rtol=1e-5)


@pytest.mark.parametrize("size", [1, 2, 3, 4])
def test_local_response_norm_matches_torch(size):
    x = RNG.standard_normal((2, 6, 3, 3)).astype(np.float32)
    op = build_op("local_response_norm", "iOS17", x=x, size=size, alpha=np.float32(0.5),
                  beta=np.float32(0.75), k=np.float32(2.0))
    (out,) = run_kernel(op)
    expected = torch.nn.LocalResponseNorm(size, alpha=0.5, beta=0.75, k=2.0)(_t(x))
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-10)


def test_naive_layer_norm_overflows_its_fp16_sum_of_squares():
    """Σ(x-μ)² = 384·20² = 153600 > 65504: the textbook fp16 lowering returns zeros,
    the careful one (fp32 statistics) normalizes."""
    x = np.where(np.arange(384) % 2 == 0, 20.0, -20.0).astype(np.float16)[None]
    with np.errstate(all="ignore"):  # coremltools' fp16 value inference overflows too
        op = build_op("layer_norm", "iOS17", x=x, axes=np.array([-1], np.int32),
                      epsilon=np.float16(1e-5))
        (careful,) = run_kernel(op, dtype=np.float16)
        (naive,) = run_kernel(op, dtype=np.float16, variants=("naive",))
    np.testing.assert_allclose(np.abs(careful), 1.0, rtol=1e-3)
    np.testing.assert_array_equal(naive, 0.0)
    (exact,) = run_kernel(op, dtype=np.float64, variants=("naive",))
    np.testing.assert_allclose(np.abs(exact), 1.0, rtol=1e-6)


@pytest.mark.parametrize("op_type", ["instance_norm", "l2_norm"])
def test_naive_variants_agree_in_float64(op_type):
    op = build_op(op_type, "iOS17", x=X)
    (careful,) = run_kernel(op)
    (naive,) = run_kernel(op, variants=("naive",))
    np.testing.assert_allclose(naive, careful, rtol=1e-10)

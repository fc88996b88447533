"""Activation MIL ops (coremltools ``mil/ops/defs/iOS15/activation.py`` semantics).

The default kernels are the numerically careful forms a good runtime uses: softplus as
``max(x, 0) + log1p(exp(-|x|))``, sigmoid without overflow on either side, silu through
that sigmoid. ``naive`` variants are the textbook formulas evaluated in the compute
dtype (``log(1 + exp(x))``, ``1 / (1 + exp(-x))``): in fp16 ``exp(x)`` overflows past
x ≈ 11.09 and the naive softplus becomes inf, which is the range hazard ``fp16-naive``
exists to expose. ``prelu`` and ``softplus_parametric`` take per-channel parameters on
axis 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels.special import erf, gelu_exact32

_SQRT_2_OVER_PI = np.sqrt(2.0 / np.pi)


@kernel("relu")
def relu(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return np.maximum(x, ctx.dtype(0))


@kernel("relu6")
def relu6(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return np.minimum(np.maximum(x, ctx.dtype(0)), ctx.dtype(6))


def stable_sigmoid(x: np.ndarray) -> np.ndarray:
    """1/(1+e^-x) for x ≥ 0 and e^x/(1+e^x) below: no exp ever overflows."""
    e = np.exp(-np.abs(x))
    one = x.dtype.type(1)
    return np.where(x >= 0, one / (one + e), e / (one + e))


def naive_sigmoid(x: np.ndarray) -> np.ndarray:
    one = x.dtype.type(1)
    return one / (one + np.exp(-x))


@kernel("sigmoid")
def sigmoid(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return stable_sigmoid(x)


@kernel("sigmoid", variant="naive")
def sigmoid_naive(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return naive_sigmoid(x)


@kernel("silu")
def silu(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return x * stable_sigmoid(x)


@kernel("silu", variant="naive")
def silu_naive(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return x * naive_sigmoid(x)


@kernel("sigmoid_hard")
def sigmoid_hard(ctx: KernelContext, x: np.ndarray, alpha: Any, beta: Any) -> np.ndarray:
    return np.minimum(np.maximum(ctx.f(alpha) * x + ctx.f(beta), ctx.dtype(0)), ctx.dtype(1))


@kernel("scaled_tanh")
def scaled_tanh(ctx: KernelContext, x: np.ndarray, alpha: Any, beta: Any) -> np.ndarray:
    return ctx.f(alpha) * np.tanh(x * ctx.f(beta))


def stable_softplus(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0)) + np.log1p(np.exp(-np.abs(x)))


def naive_softplus(x: np.ndarray) -> np.ndarray:
    return np.log(x.dtype.type(1) + np.exp(x))


@kernel("softplus")
def softplus(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return stable_softplus(x)


@kernel("softplus", variant="naive")
def softplus_naive(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return naive_softplus(x)


def channel_param(value: Any, x: np.ndarray, ctx: KernelContext) -> np.ndarray:
    """A per-channel parameter ``[C]`` shaped to broadcast on axis 1 of ``x``."""
    param = ctx.f(value)
    if param.ndim == 1 and x.ndim >= 2:
        return param.reshape((1, -1) + (1,) * (x.ndim - 2))
    return param


@kernel("softplus_parametric")
def softplus_parametric(ctx: KernelContext, x: np.ndarray, alpha: Any, beta: Any) -> np.ndarray:
    a, b = channel_param(alpha, x, ctx), channel_param(beta, x, ctx)
    return a * stable_softplus(x * b)


@kernel("softplus_parametric", variant="naive")
def softplus_parametric_naive(
    ctx: KernelContext, x: np.ndarray, alpha: Any, beta: Any
) -> np.ndarray:
    a, b = channel_param(alpha, x, ctx), channel_param(beta, x, ctx)
    return a * naive_softplus(x * b)


@kernel("softsign")
def softsign(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return x / (ctx.dtype(1) + np.abs(x))


@kernel("elu")
def elu(ctx: KernelContext, x: np.ndarray, alpha: Any) -> np.ndarray:
    negative = ctx.f(alpha) * np.expm1(np.minimum(x, ctx.dtype(0)))
    return np.where(x > 0, x, negative)


@kernel("leaky_relu")
def leaky_relu(ctx: KernelContext, x: np.ndarray, alpha: Any) -> np.ndarray:
    return np.where(x >= 0, x, x * ctx.f(alpha))


@kernel("prelu")
def prelu(ctx: KernelContext, x: np.ndarray, alpha: Any) -> np.ndarray:
    zero = ctx.dtype(0)
    return np.maximum(x, zero) + np.minimum(x, zero) * channel_param(alpha, x, ctx)


@kernel("linear_activation")
def linear_activation(ctx: KernelContext, x: np.ndarray, alpha: Any, beta: Any) -> np.ndarray:
    return x * ctx.f(alpha) + ctx.f(beta)


@kernel("clamped_relu")
def clamped_relu(ctx: KernelContext, x: np.ndarray, alpha: Any, beta: Any) -> np.ndarray:
    zero, b = ctx.dtype(0), ctx.f(beta)
    return np.minimum(np.maximum(x, zero), b) + np.minimum(np.minimum(x, zero) * ctx.f(alpha), b)


@kernel("thresholded_relu")
def thresholded_relu(ctx: KernelContext, x: np.ndarray, alpha: Any) -> np.ndarray:
    return np.where(x >= ctx.f(alpha), x, ctx.dtype(0))


@kernel("gelu")
def gelu(ctx: KernelContext, x: np.ndarray, mode: Any = None) -> np.ndarray:
    """``EXACT`` 0.5·x·(1+erf(x/√2)); ``TANH_APPROXIMATION``; ``SIGMOID_APPROXIMATION``."""
    half, one = ctx.dtype(0.5), ctx.dtype(1)
    mode = "EXACT" if mode is None else str(mode)
    if mode == "TANH_APPROXIMATION":
        inner = ctx.dtype(_SQRT_2_OVER_PI) * (x + ctx.dtype(0.044715) * x * x * x)
        return half * x * (one + np.tanh(inner))
    if mode == "SIGMOID_APPROXIMATION":
        return x * stable_sigmoid(ctx.dtype(1.702) * x)
    if mode != "EXACT":
        raise ValueError(f"unknown gelu mode {mode!r}")
    if x.dtype == np.float32:
        return gelu_exact32(x)
    return half * x * (one + erf(x * ctx.dtype(1.0 / np.sqrt(2.0))))

"""Normalization kernels: ``layer_norm``, ``batch_norm``, ``instance_norm``, ``l2_norm``,
``local_response_norm``.

Statistics are the population ones of coremltools' value inference
(``(x - mean) / sqrt(mean((x - mean)^2) + eps)``), computed in the compute dtype.
``local_response_norm`` sums squares over channels ``[c - size//2, c + (size-1)//2]``,
the window of ``torch.nn.LocalResponseNorm`` the conformance tests compare against.
The ``naive`` variants (layer/instance/l2 norm) accumulate their sums sequentially in
the compute dtype, the textbook fp16 lowering whose sum of squares overflows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels._args import axis_of, into_fresh, ints, scalar
from nebisect.mil.kernels.reduction import sequential_sum

Normalize = Callable[[np.ndarray, tuple[int, ...], float], np.ndarray]


def _normalize(x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    centered = x - np.mean(x, axis=axes, keepdims=True)
    var = np.mean(np.square(centered), axis=axes, keepdims=True)
    return into_fresh(np.divide, centered, np.sqrt(var + x.dtype.type(eps)))


def _normalize_naive(x: np.ndarray, axes: tuple[int, ...], eps: float) -> np.ndarray:
    """Textbook statistics with sequential accumulators in the compute dtype: under
    fp16-naive the sum of squares overflows (→ inf → output 0) once Σ(x-μ)² > 65504."""
    count = x.dtype.type(int(np.prod([x.shape[a] for a in axes])))
    centered = x - sequential_sum(x, axes, True) / count
    var = sequential_sum(centered * centered, axes, True) / count
    return centered / np.sqrt(var + x.dtype.type(eps))


def _per_channel(value: Any, rank: int) -> np.ndarray:
    return np.asarray(value).reshape((1, -1) + (1,) * (rank - 2))


def _layer_norm(
    normalize: Normalize, x: Any, axes: Any, gamma: Any, beta: Any, epsilon: Any
) -> np.ndarray:
    x = np.asarray(x)
    dims = tuple(range(x.ndim)) if axes is None else tuple(axis_of(a, x.ndim) for a in ints(axes))
    out = normalize(x, dims, scalar(epsilon, 1e-5))
    param_shape = [x.shape[i] if i in dims else 1 for i in range(x.ndim)]
    if gamma is not None:
        out = into_fresh(np.multiply, out, np.asarray(gamma).reshape(param_shape))
    if beta is not None:
        out = into_fresh(np.add, out, np.asarray(beta).reshape(param_shape))
    return out


def _layer_norm_kernel(normalize: Normalize) -> Callable[..., np.ndarray]:
    """The ``layer_norm`` kernel normalizing with ``normalize``."""

    def layer_norm(
        ctx: KernelContext,
        x: np.ndarray,
        axes: Any = None,
        gamma: Any = None,
        beta: Any = None,
        epsilon: Any = 1e-5,
    ) -> np.ndarray:
        return _layer_norm(normalize, x, axes, gamma, beta, epsilon)

    return layer_norm


layer_norm = kernel("layer_norm")(_layer_norm_kernel(_normalize))
layer_norm_naive = kernel("layer_norm", variant="naive")(_layer_norm_kernel(_normalize_naive))


@kernel("batch_norm")
def batch_norm(
    ctx: KernelContext,
    x: np.ndarray,
    mean: Any,
    variance: Any,
    gamma: Any = None,
    beta: Any = None,
    epsilon: Any = 1e-5,
) -> np.ndarray:
    x = np.asarray(x)
    eps = x.dtype.type(scalar(epsilon, 1e-5))
    out = (x - _per_channel(mean, x.ndim)) / np.sqrt(_per_channel(variance, x.ndim) + eps)
    if gamma is not None:
        out = out * _per_channel(gamma, x.ndim)
    if beta is not None:
        out = out + _per_channel(beta, x.ndim)
    return out


def _instance_norm(
    normalize: Normalize, x: Any, gamma: Any, beta: Any, epsilon: Any
) -> np.ndarray:
    x = np.asarray(x)
    out = normalize(x, tuple(range(2, x.ndim)), scalar(epsilon, 1e-5))
    if gamma is not None:
        out = out * _per_channel(gamma, x.ndim)
    if beta is not None:
        out = out + _per_channel(beta, x.ndim)
    return out


@kernel("instance_norm")
def instance_norm(
    ctx: KernelContext, x: np.ndarray, gamma: Any = None, beta: Any = None, epsilon: Any = 1e-5
) -> np.ndarray:
    return _instance_norm(_normalize, x, gamma, beta, epsilon)


@kernel("instance_norm", variant="naive")
def instance_norm_naive(
    ctx: KernelContext, x: np.ndarray, gamma: Any = None, beta: Any = None, epsilon: Any = 1e-5
) -> np.ndarray:
    return _instance_norm(_normalize_naive, x, gamma, beta, epsilon)


def _l2_dims(x: np.ndarray) -> tuple[int, ...]:
    """The last three dims (all, if fewer) — leading dims are batch."""
    return tuple(range(max(x.ndim - 3, 0), x.ndim))


@kernel("l2_norm")
def l2_norm(ctx: KernelContext, x: np.ndarray, epsilon: Any = 1e-6) -> np.ndarray:
    x = np.asarray(x)
    square_sum = np.sum(x * x, axis=_l2_dims(x), keepdims=True)
    return x / np.sqrt(square_sum + x.dtype.type(scalar(epsilon, 1e-6)))


@kernel("l2_norm", variant="naive")
def l2_norm_naive(ctx: KernelContext, x: np.ndarray, epsilon: Any = 1e-6) -> np.ndarray:
    x = np.asarray(x)
    square_sum = sequential_sum(x * x, _l2_dims(x), True)
    return x / np.sqrt(square_sum + x.dtype.type(scalar(epsilon, 1e-6)))


@kernel("local_response_norm")
def local_response_norm(
    ctx: KernelContext,
    x: np.ndarray,
    size: Any,
    alpha: Any = 1e-4,
    beta: Any = 0.75,
    k: Any = 1.0,
) -> np.ndarray:
    x = np.asarray(x)
    n = int(np.asarray(size).item())
    squares = np.pad(np.square(x), [(0, 0), (n // 2, (n - 1) // 2)] + [(0, 0)] * (x.ndim - 2))
    channels = x.shape[1]
    window = sum(squares[:, i : i + channels] for i in range(n))
    scale = x.dtype.type(scalar(k, 1.0)) + x.dtype.type(scalar(alpha, 1e-4) / n) * window
    return x / np.power(scale, x.dtype.type(scalar(beta, 0.75)))

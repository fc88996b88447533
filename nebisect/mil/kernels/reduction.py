"""Reduction MIL ops: every ``reduce_*`` op plus ``reduce_argmax`` / ``reduce_argmin``.

``axes`` absent means every axis; ``keep_dims`` defaults to False (coremltools
``ReductionAxes``). The default kernels accumulate in the compute dtype with numpy's
pairwise summation (fp32 for the ``fp16`` model), shift ``reduce_log_sum_exp`` by its
maximum and scale ``reduce_l2_norm`` by the largest magnitude, so no intermediate
overflows that the result itself would not. The ``naive`` variants are the textbook
formulas with a *sequential* accumulator of the compute dtype — each partial sum is
rounded to fp16 under ``fp16-naive`` — and no shift or scaling. Max/min/argmax/argmin
are exact in any dtype and have no variant. NaN propagates through every reduction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel


def axes_of(x: np.ndarray, axes: Any) -> tuple[int, ...]:
    """The reduced axes, normalized to non-negative; None means all axes."""
    if axes is None:
        return tuple(range(x.ndim))
    return tuple(sorted({int(a) % x.ndim for a in np.atleast_1d(axes)})) if x.ndim else ()


def keep(keep_dims: Any) -> bool:
    return bool(keep_dims) if keep_dims is not None else False


def sequential_sum(
    x: np.ndarray, axes: tuple[int, ...], keep_dims: bool, ufunc: np.ufunc = np.add
) -> np.ndarray:
    """Reduce over ``axes`` one element at a time in ``x``'s dtype (each step rounded).

    ``np.add.reduce`` on float16 accumulates in float32 internally; ``accumulate``
    stores every partial result, which is what an fp16 accumulator does.
    """
    rest = [a for a in range(x.ndim) if a not in axes]
    moved = np.transpose(x, rest + list(axes))
    kept_shape = moved.shape[: len(rest)]
    flat = moved.reshape(*kept_shape, -1)
    if flat.shape[-1] == 0:
        total = np.full(kept_shape, ufunc.identity, dtype=x.dtype)
    else:
        total = ufunc.accumulate(flat, axis=-1, dtype=x.dtype)[..., -1]
    if keep_dims:
        total = np.expand_dims(total, axes) if axes else total
    return total


def _is_float(x: np.ndarray) -> bool:
    return x.dtype.kind == "f"


def _numpy_reduction(fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(ctx: KernelContext, x: np.ndarray, axes: Any = None, keep_dims: Any = None) -> Any:
        return fn(x, axis=axes_of(x, axes), keepdims=keep(keep_dims))

    return run


_SUM = kernel("reduce_sum")(_numpy_reduction(np.sum))
_PROD = kernel("reduce_prod")(_numpy_reduction(np.prod))
kernel("reduce_max")(_numpy_reduction(np.max))
kernel("reduce_min")(_numpy_reduction(np.min))


@kernel("reduce_mean")
def reduce_mean(ctx: KernelContext, x: np.ndarray, axes: Any = None, keep_dims: Any = None) -> Any:
    ax = axes_of(x, axes)
    if not _is_float(x):
        return np.trunc(np.mean(x, axis=ax, keepdims=keep(keep_dims)))
    return np.mean(x, axis=ax, keepdims=keep(keep_dims))


@kernel("reduce_sum_square")
def reduce_sum_square(
    ctx: KernelContext, x: np.ndarray, axes: Any = None, keep_dims: Any = None
) -> Any:
    return np.sum(x * x, axis=axes_of(x, axes), keepdims=keep(keep_dims))


@kernel("reduce_l1_norm")
def reduce_l1_norm(
    ctx: KernelContext, x: np.ndarray, axes: Any = None, keep_dims: Any = None
) -> Any:
    return np.sum(np.abs(x), axis=axes_of(x, axes), keepdims=keep(keep_dims))


@kernel("reduce_l2_norm")
def reduce_l2_norm(
    ctx: KernelContext, x: np.ndarray, axes: Any = None, keep_dims: Any = None
) -> Any:
    ax, kd = axes_of(x, axes), keep(keep_dims)
    if not _is_float(x):
        return np.sqrt(np.sum(x.astype(np.float64) ** 2, axis=ax, keepdims=kd))
    scale = np.max(np.abs(x), axis=ax, keepdims=True) if x.size else np.ones((1,) * x.ndim, x.dtype)
    safe = np.where(np.isfinite(scale) & (scale > 0), scale, x.dtype.type(1))
    scaled = x / safe
    norm = np.sqrt(np.sum(scaled * scaled, axis=ax, keepdims=True)) * safe
    norm = np.where(np.isinf(scale), np.abs(scale), norm)
    return norm if kd else np.squeeze(norm, axis=ax)


@kernel("reduce_log_sum")
def reduce_log_sum(
    ctx: KernelContext, x: np.ndarray, axes: Any = None, keep_dims: Any = None
) -> Any:
    return np.log(np.sum(x, axis=axes_of(x, axes), keepdims=keep(keep_dims)))


@kernel("reduce_log_sum_exp")
def reduce_log_sum_exp(
    ctx: KernelContext, x: np.ndarray, axes: Any = None, keep_dims: Any = None
) -> Any:
    """``m + log Σ exp(x - m)`` with ``m`` the max (0 where the max is not finite)."""
    ax, kd = axes_of(x, axes), keep(keep_dims)
    if x.size == 0:
        return np.log(np.sum(np.exp(x), axis=ax, keepdims=kd))
    top = np.max(x, axis=ax, keepdims=True)
    shift = np.where(np.isfinite(top), top, x.dtype.type(0))
    total = np.sum(np.exp(x - shift), axis=ax, keepdims=True)
    out = np.log(total) + shift
    return out if kd else np.squeeze(out, axis=ax)


def _arg(fn: Callable[..., Any]) -> Callable[..., Any]:
    """argmax/argmin; ``output_dtype`` (iOS17+) is applied by the interpreter's cast."""

    def run(
        ctx: KernelContext,
        x: np.ndarray,
        axis: Any = None,
        keep_dims: Any = None,
        output_dtype: Any = None,
    ) -> Any:
        ax = -1 if axis is None else int(axis)
        return fn(x, axis=ax, keepdims=keep(keep_dims))

    return run


kernel("reduce_argmax")(_arg(np.argmax))
kernel("reduce_argmin")(_arg(np.argmin))


def _naive(
    default: Callable[..., Any],
    transform: Callable[[np.ndarray], np.ndarray],
    finish: Callable[[np.ndarray, Any], Any],
    ufunc: np.ufunc = np.add,
) -> Callable[..., Any]:
    """A naive reduction: ``finish(sequential Σ transform(x), count)`` in the compute dtype.

    Integer inputs have no rounding hazard and go to the default kernel.
    """

    def run(ctx: KernelContext, x: np.ndarray, axes: Any = None, keep_dims: Any = None) -> Any:
        if not _is_float(x):
            return default(ctx, x, axes, keep_dims)
        ax, kd = axes_of(x, axes), keep(keep_dims)
        count = int(np.prod([x.shape[a] for a in ax])) if ax else 1
        return finish(sequential_sum(transform(x), ax, kd, ufunc), x.dtype.type(count))

    return run


def _identity(x: np.ndarray) -> np.ndarray:
    return x


def _square(x: np.ndarray) -> np.ndarray:
    return x * x


_NAIVE: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]] = {
    "reduce_sum": (_SUM, _identity, lambda s, n: s),
    "reduce_mean": (reduce_mean, _identity, lambda s, n: s / n),
    "reduce_sum_square": (reduce_sum_square, _square, lambda s, n: s),
    "reduce_l1_norm": (reduce_l1_norm, np.abs, lambda s, n: s),
    "reduce_l2_norm": (reduce_l2_norm, _square, lambda s, n: np.sqrt(s)),
    "reduce_log_sum": (reduce_log_sum, _identity, lambda s, n: np.log(s)),
    "reduce_log_sum_exp": (reduce_log_sum_exp, np.exp, lambda s, n: np.log(s)),
}

for _name, (_default, _transform, _finish) in _NAIVE.items():
    kernel(_name, variant="naive")(_naive(_default, _transform, _finish))
kernel("reduce_prod", variant="naive")(_naive(_PROD, _identity, lambda s, n: s, np.multiply))

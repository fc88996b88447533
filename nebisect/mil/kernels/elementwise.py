"""Elementwise MIL ops: unary math, binary arithmetic, comparisons and logical ops.

Semantics follow coremltools' op definitions (``mil/ops/defs/iOS15/elementwise_*.py``):
``inverse``/``log``/``rsqrt`` add their ``epsilon`` (defaults 1e-4, 1e-45, 1e-12) before
the function; ``round`` rounds halves to even ("0.5 is rounded to 0"); ``threshold`` is
``max(x, alpha)``; ``mod``/``floor_div`` follow Python's floor semantics. Mixed
int/float binary inputs promote to float in the compute dtype, like the MIL type
promotion; integer results are cast back to the declared dtype by the interpreter.

Each op is one numpy expression evaluated in the compute dtype, so there is no separate
``naive`` variant: an fp16 compute dtype already gives the textbook fp16 result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels.special import erf as _erf

_UNARY: dict[str, Callable[[np.ndarray], Any]] = {
    "abs": np.abs,
    "acos": np.arccos,
    "asin": np.arcsin,
    "atan": np.arctan,
    "atanh": np.arctanh,
    "ceil": np.ceil,
    "cos": np.cos,
    "cosh": np.cosh,
    "exp": np.exp,
    "exp2": np.exp2,
    "floor": np.floor,
    "round": np.round,
    "sign": np.sign,
    "sin": np.sin,
    "sinh": np.sinh,
    "sqrt": np.sqrt,
    "square": np.square,
    "tan": np.tan,
    "tanh": np.tanh,
    "erf": _erf,
}


def _unary(fn: Callable[[np.ndarray], Any]) -> Callable[..., Any]:
    def run(ctx: KernelContext, x: np.ndarray) -> Any:
        return fn(x)

    return run


for _name, _fn in _UNARY.items():
    kernel(_name)(_unary(_fn))


def _with_epsilon(x: np.ndarray, epsilon: Any, default: float, ctx: KernelContext) -> np.ndarray:
    eps = ctx.f(default if epsilon is None else epsilon)
    return x + eps


@kernel("inverse")
def inverse(ctx: KernelContext, x: np.ndarray, epsilon: Any = None) -> np.ndarray:
    return np.reciprocal(_with_epsilon(x, epsilon, 1e-4, ctx))


@kernel("log")
def log(ctx: KernelContext, x: np.ndarray, epsilon: Any = None) -> np.ndarray:
    return np.log(_with_epsilon(x, epsilon, 1e-45, ctx))


@kernel("rsqrt")
def rsqrt(ctx: KernelContext, x: np.ndarray, epsilon: Any = None) -> np.ndarray:
    return np.reciprocal(np.sqrt(_with_epsilon(x, epsilon, 1e-12, ctx)))


@kernel("clip")
def clip(ctx: KernelContext, x: np.ndarray, alpha: Any, beta: Any) -> np.ndarray:
    return np.minimum(np.maximum(x, ctx.f(alpha)), ctx.f(beta))


@kernel("threshold")
def threshold(ctx: KernelContext, x: np.ndarray, alpha: Any) -> np.ndarray:
    return np.maximum(x, ctx.f(alpha))


@kernel("identity")
def identity(ctx: KernelContext, x: Any) -> Any:
    return x


@kernel("logical_not")
def logical_not(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    return np.logical_not(x)


def promote(ctx: KernelContext, x: Any, y: Any) -> tuple[Any, Any]:
    """Both operands in the compute dtype when either is float (MIL type promotion)."""
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype.kind == "f" or y.dtype.kind == "f":
        return ctx.f(x), ctx.f(y)
    return x, y


def _true_divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "f":
        return np.true_divide(x, y)
    # Integer real_div truncates like the declared int32 result it is stored in.
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.trunc(np.true_divide(x, y))


def power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x ** y``; integer bases with a negative exponent go through float64."""
    if x.dtype.kind != "f" and np.any(y < 0):
        return np.power(x.astype(np.float64), y)
    return np.power(x, y)


_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], Any]] = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "real_div": _true_divide,
    "floor_div": np.floor_divide,
    "mod": np.mod,
    "pow": power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "equal": np.equal,
    "not_equal": np.not_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
    "less": np.less,
    "less_equal": np.less_equal,
}

_LOGICAL: dict[str, Callable[[np.ndarray, np.ndarray], Any]] = {
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
}


def _binary(fn: Callable[[np.ndarray, np.ndarray], Any]) -> Callable[..., Any]:
    def run(ctx: KernelContext, x: Any, y: Any) -> Any:
        a, b = promote(ctx, x, y)
        return fn(a, b)

    return run


def _logical(fn: Callable[[np.ndarray, np.ndarray], Any]) -> Callable[..., Any]:
    def run(ctx: KernelContext, x: Any, y: Any) -> Any:
        return fn(x, y)

    return run


for _name, _fn2 in _BINARY.items():
    kernel(_name)(_binary(_fn2))
for _name, _fn2 in _LOGICAL.items():
    kernel(_name)(_logical(_fn2))

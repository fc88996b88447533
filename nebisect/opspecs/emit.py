"""Helpers emitters share: typed constants and seeded weights.

iOS17 ops require scalar parameters (alpha, epsilon, …) in the dtype of ``x``, and
weights must be constants; weights are derived from a seed in the case params so that a
case stays a small JSON dict and rebuilds the same program anywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from nebisect.opspecs.strategies import DTYPES


def np_dtype(dtype: str) -> Any:
    return DTYPES[dtype]


def scalar(value: float, dtype: str) -> Any:
    """A scalar constant in the op's float dtype."""
    return np_dtype(dtype)(value)


def seeded(
    shape: Sequence[int], seed: int, dtype: str, lo: float = -1.0, hi: float = 1.0
) -> np.ndarray:
    """A constant tensor drawn uniformly from [lo, hi) with numpy's seeded generator."""
    rng = np.random.default_rng(int(seed))
    return rng.uniform(lo, hi, tuple(shape)).astype(np_dtype(dtype))


def seeded_indices(shape: Sequence[int], seed: int, upper: int) -> np.ndarray:
    """Constant int32 indices in [0, upper)."""
    rng = np.random.default_rng(int(seed))
    return rng.integers(0, max(upper, 1), tuple(shape)).astype(np.int32)


def unary(name: str, *param_names: str) -> Callable[..., Any]:
    """An emitter calling ``mb.<name>(x=…, <scalar params in x's dtype>)``."""

    def emit(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
        typed = {key: scalar(params[key], dtype) for key in param_names}
        return getattr(mb, name)(x=inputs["x"], **typed)

    emit.__doc__ = f"MIL {name} on one tensor" + (
        f" with scalar {', '.join(param_names)}." if param_names else "."
    )
    return emit


def binary(name: str) -> Callable[..., Any]:
    """An emitter calling ``mb.<name>(x=…, y=…)``."""

    def emit(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
        return getattr(mb, name)(x=inputs["x"], y=inputs["y"])

    emit.__doc__ = f"MIL {name} of two broadcast-compatible tensors."
    return emit

"""Argument normalisation shared by the tensor-manipulation kernel families.

MIL hands kernels its constant parameters as numpy scalars or small arrays (``axis``,
``perm``, masks, mode strings) and leaves optional ones ``None``. These helpers turn
them into plain Python values once, so every kernel reads like its MIL definition
instead of repeating ``int(np.asarray(v).item())`` dances.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext

_FLOAT_NAMES = frozenset({"fp16", "fp32", "fp64"})


def axis_of(axis: Any, rank: int) -> int:
    """``axis`` as a non-negative int for a tensor of ``rank`` (negative counts from the end)."""
    value = int(np.asarray(axis).item())
    return value + rank if value < 0 else value


def ints(value: Any) -> list[int]:
    """A const int vector (or scalar) as a list of Python ints; ``None`` is empty."""
    if value is None:
        return []
    return [int(v) for v in np.asarray(value).reshape(-1)]


def flag(value: Any, default: bool = False) -> bool:
    """A const bool input (``None`` means the MIL default)."""
    if value is None:
        return default
    return bool(np.asarray(value).item())


def text(value: Any, default: str = "") -> str:
    """A const string input (``None`` means the MIL default)."""
    if value is None:
        return default
    if isinstance(value, np.ndarray):
        value = value.item()
    return value.decode() if isinstance(value, bytes) else str(value)


def scalar(value: Any, default: float) -> float:
    """A const float input as a Python float."""
    if value is None:
        return default
    return float(np.asarray(value).item())


def into_fresh(ufunc: np.ufunc, fresh: Any, operand: Any) -> Any:
    """``ufunc(fresh, operand)`` written into ``fresh`` — an array the kernel itself made
    and holds alone — when the result has its dtype and shape, else a new array: the
    same values with one array fewer to allocate and fill."""
    operand = np.asarray(operand)
    if (not isinstance(fresh, np.ndarray) or np.result_type(fresh, operand) != fresh.dtype
            or np.broadcast_shapes(fresh.shape, operand.shape) != fresh.shape):
        return ufunc(fresh, operand)
    return ufunc(fresh, operand, out=fresh)


def numpy_dtype_of(type_name: str, ctx: KernelContext) -> Any:
    """The numpy dtype for a MIL dtype name; floats compute in ``ctx.dtype``."""
    if type_name in _FLOAT_NAMES:
        return ctx.dtype
    if type_name == "bool":
        return np.bool_
    if type_name.startswith(("int", "uint")):
        return np.dtype(type_name)
    raise ValueError(f"unsupported MIL dtype {type_name!r}")


def output_dtype(ctx: KernelContext, index: int = 0, fallback: Any = None) -> Any:
    """The numpy dtype of output ``index`` as the op declares it.

    Ops that *create* values (``fill``, ``one_hot``, ``range_1d``, ``cast``) take their
    result dtype from the op's declared output type; without an op (bare kernel call) the
    ``fallback`` dtype is used.
    """
    if ctx.op is None:
        return fallback if fallback is not None else ctx.dtype
    from coremltools.converters.mil.mil import types

    return numpy_dtype_of(types.builtin_to_string(ctx.op.outputs[index].dtype), ctx)

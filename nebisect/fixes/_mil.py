"""Small MIL helpers shared by the graph fixes (typed constants, guards, replacement).

coremltools' binary ops refuse mixed dtypes, so every constant a rewrite introduces is
created in the dtype of the tensor it meets (:func:`typed`); a new op takes over the
*name* of the output it replaces, so block outputs keep the names callers know.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.mil.quiet import import_coremltools


def _types() -> Any:
    import_coremltools()
    from coremltools.converters.mil.mil import types

    return types


def builder() -> Any:
    """coremltools' MIL builder (``mb``)."""
    import_coremltools()
    from coremltools.converters.mil.mil import Builder

    return Builder


def is_float(var: Any) -> bool:
    """True for an fp16/fp32/fp64 tensor or scalar."""
    return bool(_types().is_float(var.dtype))


def typed(var: Any, value: float) -> np.ndarray:
    """``value`` as a 0-d constant in ``var``'s dtype (fp16 graphs get fp16 constants)."""
    return np.array(value, dtype=_types().nptype_from_builtin(var.dtype))


def producer(var: Any, op_type: str) -> Any:
    """The op of type ``op_type`` that produced ``var``, or None."""
    op = var.op
    return op if op is not None and op.op_type == op_type else None


def scalar(var: Any) -> float | None:
    """The value of a constant scalar (or one-element tensor), else None."""
    value = var.val
    if value is None:
        return None
    array = np.asarray(value)
    return float(array.reshape(-1)[0]) if array.size == 1 else None


def negligible_epsilon(log_op: Any) -> bool:
    """True when a ``log`` op's epsilon does not change the math (coremltools' 1e-45)."""
    if log_op.epsilon is None:
        return True
    eps = scalar(log_op.epsilon)
    return eps is not None and abs(eps) <= 1e-30


def replace(old_op: Any, new_var: Any, block: Any) -> None:
    """Point every use of ``old_op``'s output at ``new_var`` and drop ``old_op``."""
    block.replace_uses_of_var_after_op(
        anchor_op=old_op, old_var=old_op.outputs[0], new_var=new_var
    )
    block.remove_ops([old_op])

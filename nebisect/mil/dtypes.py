"""Map coremltools MIL builtin types to numpy dtypes.

Kept in one place so the interpreter, the validator and the kernels agree on what a
declared ``fp16`` / ``int32`` / ``bool`` means; coremltools is imported lazily because
only code that already holds a MIL program calls these.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np

#: The largest finite fp16 value: where an fp16 intermediate overflows to inf.
FP16_MAX = 65504.0


@cache
def numpy_dtype(builtin: Any) -> np.dtype:
    """The numpy dtype of a MIL builtin (``types.fp16`` → float16); object for non-numeric."""
    from coremltools.converters.mil.mil import types

    try:
        return np.dtype(types.nptype_from_builtin(builtin))
    except (TypeError, KeyError, ValueError):
        return np.dtype(object)


def var_element_dtype(var: Any) -> np.dtype | None:
    """The numpy element dtype of a tensor or scalar var; None for lists, tuples, states."""
    from coremltools.converters.mil.mil import types

    sym_type = var.sym_type
    if types.is_tensor(sym_type):
        return numpy_dtype(sym_type.get_primitive())
    if types.is_scalar(sym_type):
        return numpy_dtype(sym_type)
    return None


def state_element_dtype(var: Any) -> np.dtype | None:
    """The numpy element dtype of the tensor a state var wraps (``ct.StateType``, iOS 18);
    None when ``var`` is no state."""
    from coremltools.converters.mil.mil import types

    sym_type = var.sym_type
    if not types.is_state(sym_type):
        return None
    return numpy_dtype(sym_type.wrapped_type().get_primitive())


def spec_declares_fp16(spec: Any, function: str = "") -> bool:
    """Does an ML program's spec declare any top-level op's output fp16 (in ``function``
    alone when named: the functions of a multifunction package may differ)? Read from
    the protobuf, without building the program (a Core ML target never builds it)."""
    from coremltools.proto import MIL_pb2

    half = MIL_pb2.DataType.FLOAT16
    functions = spec.mlProgram.functions
    return any(output.type.tensorType.dataType == half
               for function in ([functions[function]] if function else functions.values())
               for block in function.block_specializations.values()
               for op in block.operations for output in op.outputs)

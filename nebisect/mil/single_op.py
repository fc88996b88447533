"""One MIL op in isolation: build it from constant inputs, run its kernel, and read
coremltools' own value inference for the same op.

Kernel tests use this to check a kernel against the definition it implements without
the interpreter: coremltools constant-folds an op whose inputs are all constant (its
``value_inference``), so the op built here carries the reference answer, and the kernel
receives exactly what the interpreter would pass — every declared input by name, the
builder's defaults filled in, absent optionals as ``None``, floats in the compute dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, get_kernel
from nebisect.mil.quiet import import_coremltools


def build_op(op_type: str, opset: str = "iOS18", **inputs: Any) -> Any:
    """The MIL operation ``op_type`` built from constant ``inputs`` at ``opset``."""
    ct = import_coremltools()
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import Function

    with Function({}, opset_version=getattr(ct.target, opset)):
        out = getattr(mb, op_type)(**inputs)
    first = out[0] if isinstance(out, (list, tuple)) else out
    return first.op


def _argument(var: Any, dtype: Any) -> Any:
    if var is None:
        return None
    if isinstance(var, (list, tuple)):
        return [_argument(v, dtype) for v in var]
    value = var.val
    if isinstance(value, np.ndarray) and value.dtype.kind == "f":
        return value.astype(dtype)
    if isinstance(value, np.floating):
        return dtype(value)
    return value


def kernel_arguments(op: Any, dtype: Any = np.float64) -> dict[str, Any]:
    """The keyword arguments the interpreter hands ``op``'s kernel."""
    return {
        key: _argument(op.inputs.get(key), dtype)
        for key in op.input_spec.input_types
        if not key.startswith("_")
    }


def run_kernel(op: Any, dtype: Any = np.float64, variants: tuple[str, ...] = ()) -> tuple:
    """``op``'s kernel applied to its own constant inputs; always a tuple of outputs."""
    fn = get_kernel(op.op_type, variants)
    ctx = KernelContext(dtype=dtype, op=op, variant=variants[-1] if variants else "")
    result = fn(ctx, **kernel_arguments(op, dtype))
    return result if isinstance(result, tuple) else (result,)


def inferred_outputs(op: Any) -> tuple:
    """coremltools' value inference of ``op`` (``None`` entries where it has none)."""
    return tuple(var.val for var in op.outputs)

"""The faster overflow check answers as coremltools' own does, for every kind of const."""

from __future__ import annotations

import numpy as np
import pytest

from nebisect.mil.quiet import import_coremltools
from nebisect.sources import fp16_pass

ct = import_coremltools()
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import types  # noqa: E402
from coremltools.converters.mil.mil.passes.defs.quantization import (  # noqa: E402
    FP16ComputePrecision,
)

#: what an fp32 const may hold, and whether coremltools keeps its op in fp32
CONSTS = {
    "within": (np.array([[1.0, -65504.0], [65504.0, 0.5]], np.float32), False),
    "beyond": (np.array([1.0, 70000.0], np.float32), True),
    "beyond negative": (np.array([-65505.0, 1.0], np.float32), True),
    "infinite": (np.array([np.inf, -np.inf, 2.0], np.float32), False),
    "huge": (np.array([1e38, 3e38], np.float32), False),
    "nan": (np.array([np.nan, 1.0], np.float32), False),
    "nan and beyond": (np.array([np.nan, 1e5], np.float32), True),
    "scalar beyond": (np.float32(1e6), True),
}


def _add_op(value: np.ndarray) -> object:
    """The add op of x + const(value)."""
    shape = np.shape(value) or (1,)

    @mb.program(input_specs=[mb.TensorSpec(shape=shape, dtype=types.fp32)],
                opset_version=ct.target.iOS17)
    def program(x: object) -> object:
        return mb.add(x=x, y=value)

    return next(op for op in program.functions["main"].operations if op.op_type == "add")


@pytest.mark.parametrize("name", sorted(CONSTS))
def test_the_check_answers_as_coremltools_does(name: str) -> None:
    value, overflows = CONSTS[name]
    op = _add_op(value)
    installed = FP16ComputePrecision.fp16_overflow
    # a conversion in this process may have installed the faster check already
    original = getattr(installed, fp16_pass.COREMLTOOLS_CHECK, installed)
    assert original(op) is overflows
    fp16_pass.install()
    try:
        assert FP16ComputePrecision.fp16_overflow(op) is overflows
    finally:
        FP16ComputePrecision.fp16_overflow = staticmethod(installed)

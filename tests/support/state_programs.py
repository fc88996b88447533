"""Stateful programs (iOS 18 ``ct.StateType``) built in code, for the simulator's and
``run --steps``'s tests: a running sum ``acc += x`` whose output is the sum scaled,
so an fp16 state overflows at step ⌈65504 / x⌉ while the output stays in range."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from nebisect.mil.load import save_program
from nebisect.mil.quiet import import_coremltools

SHAPE = (1, 4)
#: the output is the state times this: in fp16 range long after the state overflows
SCALE = 1.0 / 1024


def running_sum(scale: float = SCALE) -> Any:
    """``acc += x; return acc * scale`` with ``acc`` an fp16 state of :data:`SHAPE`."""
    ct = import_coremltools()
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import types

    @mb.program(input_specs=[mb.TensorSpec(shape=SHAPE, dtype=types.fp16),
                             mb.StateTensorSpec(shape=SHAPE, dtype=types.fp16)],
                opset_version=ct.target.iOS18)
    def prog(x: Any, acc: Any) -> Any:
        total = mb.add(x=mb.read_state(input=acc), y=x)
        written = mb.coreml_update_state(state=acc, value=total)
        return mb.mul(x=written, y=np.float16(scale), name="out")

    return prog


def save_running_sum(directory: Path, scale: float = SCALE) -> Path:
    """:func:`running_sum` saved as ``directory/running_sum.mlpackage``."""
    path = directory / "running_sum.mlpackage"
    save_program(running_sum(scale), path)
    return path

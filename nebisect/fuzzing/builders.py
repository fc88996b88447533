"""Build the one-op MIL program of a fuzz case (called in the isolated child).

A case's artifact is ``Artifact("builder", "nebisect.fuzzing.builders:build", program)``
where ``program`` is the JSON dict ``{"op", "dtype", "inputs", "params", "wrap"}``; the
child calls :func:`build` with it. The op's outputs are named ``op_out`` (``op_out_0``,
``op_out_1``, … for multi-output ops) so the oracle can be pointed at them.

``wrap="ne-attract"`` embeds the op as conv → op → linear, seed 000's topology: on a
device a graph of one op stays on the CPU, while an op between a conv and a linear is
routed to the Neural Engine. The conv is a 1×1 identity (weight 1, no bias: it passes
NaN and ±inf through unchanged, which a 3×3 delta kernel would not — 0·inf is NaN), the
head is a linear picking the first ≤16 elements. The op's own output stays a program
output and is what the oracle judges; the head output only gives the graph its shape.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from nebisect.errors import NebisectError
from nebisect.mil.quiet import import_coremltools
from nebisect.opspecs.emit import np_dtype
from nebisect.opspecs.ops import get_op

OUTPUT = "op_out"
HEAD = "head"
OPSET = "iOS17"
HEAD_WIDTH = 16


def output_names(count: int) -> list[str]:
    """Names of an op's outputs in the built program."""
    return [OUTPUT] if count == 1 else [f"{OUTPUT}_{i}" for i in range(count)]


def _identity_conv(mb: Any, x: Any, dtype: str) -> Any:
    shape = list(x.shape)
    flat = mb.reshape(x=x, shape=[1, 1, 1, math.prod(shape)])
    weight = np.ones((1, 1, 1, 1), dtype=np_dtype(dtype))
    return mb.reshape(x=mb.conv(x=flat, weight=weight), shape=shape)


def _pick_head(mb: Any, y: Any, dtype: str) -> Any:
    if y.dtype != x_type(dtype):
        y = mb.cast(x=y, dtype=dtype)
    size = math.prod(y.shape) if y.shape else 1
    width = min(size, HEAD_WIDTH)
    weight = np.eye(width, size, dtype=np_dtype(dtype))
    head = mb.linear(x=mb.reshape(x=y, shape=[1, size]), weight=weight)
    head.set_name(HEAD)
    return head


def x_type(dtype: str) -> Any:
    from coremltools.converters.mil.mil import types

    return {"fp16": types.fp16, "fp32": types.fp32}[dtype]


#: wrap name → (input transform, head or None)
_WRAPS: dict[str, tuple[Callable[..., Any] | None, Callable[..., Any] | None]] = {
    "none": (None, None),
    "ne-attract": (_identity_conv, _pick_head),
}
WRAPS = tuple(_WRAPS)


def build(
    op: str,
    dtype: str,
    inputs: dict[str, list[int]],
    params: dict[str, Any],
    wrap: str = "none",
) -> Any:
    """The MIL program running op ``op`` on float inputs of the given shapes.

    Programs are memoized by their JSON description: a persistent worker sees the same
    program again and again with different values (generation, shrinking and every cliff
    probe), and the simulator keeps its compiled plan per program object.
    """
    key = json.dumps([op, dtype, inputs, params, wrap], sort_keys=True)
    return _build(key)


@functools.lru_cache(maxsize=256)
def _build(key: str) -> Any:
    op, dtype, inputs, params, wrap = json.loads(key)
    if wrap not in _WRAPS:
        raise NebisectError(f"unknown wrap {wrap!r}: one of {', '.join(WRAPS)}")
    spec = get_op(op)
    ct = import_coremltools()
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import Function, Program

    feed, head = _WRAPS[wrap]
    specs = {
        name: mb.TensorSpec(shape=tuple(shape), dtype=x_type(dtype))
        for name, shape in inputs.items()
    }
    with Function(specs, opset_version=getattr(ct.target, OPSET)) as function:
        fed = {
            name: feed(mb, var, dtype) if feed else var for name, var in function.inputs.items()
        }
        result = spec.emit(mb, fed, params, dtype)
        outs = list(result) if isinstance(result, list | tuple) else [result]
        for var, name in zip(outs, output_names(len(outs)), strict=True):
            var.set_name(name)
        if head is not None:
            outs.append(head(mb, outs[0], dtype))
        function.set_outputs(outs)
    program = Program()
    program.add_function("main", function)
    return program

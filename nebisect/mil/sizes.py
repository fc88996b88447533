"""Tensor sizes against the memory limit, from the shapes a program declares.

A program can declare a tensor no machine holds — a ``fill`` of shape 60000×60000, a
``tile`` by 60000×60000: 3.6e9 elements, 28.8 GB in float64. Whoever loads or runs it
would allocate until refused (or until the kernel kills the process): coremltools
computes a ``fill`` of constant shape while it *loads* the op, the simulator's kernel
allocates a ``tile``'s result at predict. So every tensor's element count is checked
against a memory budget before anything is allocated, at :data:`ELEMENT_BYTES` an
element (the float64 reference computes every value in float64). The budget is a plain
number of bytes the caller hands in — a job's own limit
(:func:`nebisect.isolation.memory.budget`), read by the layer that runs the job:

* :func:`check_spec` — a package's ML program as protobuf, before coremltools builds a
  single op: every function input and every op output (nested blocks included) whose
  dimensions are all constant;
* :func:`check_shape` — one value of an in-memory program, as the simulator's plan
  compiles it (builder programs never pass through a package).

A tensor over the limit is a :class:`TensorTooLarge` (a one-line
:class:`~nebisect.errors.NebisectError`): ``tensor of 3.6e9 elements exceeds the limit
…``. Shapes known only at run time (flexible inputs, data-dependent shapes) are left
to the memory limit itself, under which an allocation fails as ``oom``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from nebisect.bounds import format_size
from nebisect.errors import NebisectError

#: bytes an element is counted at: the widest dtype the simulator computes in (float64)
ELEMENT_BYTES = 8


class TensorTooLarge(NebisectError):
    """A program declares a tensor the memory limit cannot hold."""


def approximate(count: int) -> str:
    """``3600000000`` → ``3.6e9``: an element count as the error line gives it."""
    mantissa, exponent = f"{count:.1e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def element_limit(budget: int) -> int:
    """The most elements one tensor may have under a memory ``budget`` (bytes)."""
    return budget // ELEMENT_BYTES


def check_shape(shape: Sequence[int | None] | None, label: str, budget: int,
                where: str = "") -> None:
    """Refuse a tensor of static ``shape`` (None dims: unknown, not checked) over what
    ``budget`` bytes hold; ``label`` names the value (``'big' (fill)``), ``where`` the
    program."""
    if shape is None or any(d is None for d in shape):
        return
    dims = [int(d) for d in shape if d is not None]
    count = math.prod(dims)
    limit = element_limit(budget)
    if count > limit:
        prefix = f"{where}: " if where else ""
        raise TensorTooLarge(
            f"{prefix}tensor of {approximate(count)} elements exceeds the limit: {label} "
            f"declares {dims}; {format_size(budget)} of memory (--memory) "
            f"holds {approximate(limit)} at {ELEMENT_BYTES} bytes each")


def check_spec(spec: Any, where: str, budget: int) -> None:
    """Refuse an ML program spec (``Model_pb2.Model``) declaring a tensor over what
    ``budget`` bytes hold."""
    if spec.WhichOneof("Type") != "mlProgram":
        return
    for label, tensor in _declared_tensors(spec.mlProgram):
        shape = [d.constant.size if d.WhichOneof("dimension") == "constant" else None
                 for d in tensor.dimensions]
        check_shape(shape, label, budget, where)


def _declared_tensors(program: Any) -> Iterator[tuple[str, Any]]:
    """(label, TensorType) of every function input and op output, nested blocks too."""
    blocks = []
    for name, function in program.functions.items():
        for value in function.inputs:
            yield f"input {value.name!r} of {name}", value.type.tensorType
        blocks.extend(function.block_specializations.values())
    while blocks:
        block = blocks.pop()
        for value in block.inputs:
            yield f"block input {value.name!r}", value.type.tensorType
        for operation in block.operations:
            for value in operation.outputs:
                if value.type.WhichOneof("type") == "tensorType":
                    yield f"{value.name!r} ({operation.type})", value.type.tensorType
            blocks.extend(operation.blocks)

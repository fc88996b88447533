"""Input roles read off the graph: what each input of a program is for, before any
prediction.

A package carries no example inputs, and its input names are whatever the converter
kept (``ids``, ``input_1``, ``x``). What the graph does with an input says more than its
name: an integer input that reaches a ``gather``'s indices is a row number into that
table, so its valid values are ``[0, rows)`` — an id past the table is the caller's
error, never the model's; an integer input that reaches a ``softmax`` or a
``select``'s condition without being an index gates attention, a mask; an integer input
that reaches arithmetic (an offset, a dividend, a clamp — as an integer or cast to a
float) takes any value its dtype holds, large exact integers included.

:func:`infer_roles` walks forward from each input through the ops that carry its values
unchanged in meaning (casts, reshapes, the negative-index wrap ``select(x >= 0, x, x + n)``
coremltools emits before a gather) and stops at the first use that says what the value
is. Each role names the op it was read from, which the report prints.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from nebisect.codec import Record

INDICES, MASK, ARITHMETIC = "indices", "mask", "arithmetic"

#: ops that pass an index through without changing what it counts
_CARRIERS = frozenset({
    "cast", "identity", "reshape", "squeeze", "expand_dims", "transpose", "slice_by_index",
    "slice_by_size", "concat", "stack", "split", "tile", "select", "reshape_like",
})
#: ops whose result is an index shifted by a constant (the negative-index wrap)
_SHIFTS = frozenset({"add", "sub"})
#: ops that read an index (``indices`` argument) and the table dims it addresses
_INDEXERS = frozenset({"gather", "gather_along_axis", "gather_nd", "one_hot"})
#: comparisons: a mask compared with 0 or 1 is still a mask
_COMPARISONS = frozenset({"equal", "not_equal", "greater", "greater_equal", "less",
                          "less_equal", "logical_not", "logical_and", "logical_or"})
#: where a mask takes effect
_GATES = frozenset({"softmax", "scaled_dot_product_attention"})
#: ops that compute with an integer's value (not only move it)
_ARITHMETIC = frozenset({
    "add", "sub", "mul", "real_div", "floor_div", "mod", "pow", "maximum", "minimum",
    "clip", "abs", "sign", "reduce_sum", "reduce_prod", "reduce_max", "reduce_min",
    "cumsum", "matmul", "linear",
})


@dataclass(frozen=True)
class InputRole(Record):
    """What one input is for, as the graph says: ``indices`` (valid values
    ``[lo, hi]``: the rows of the table it indexes), ``mask`` or ``arithmetic``; ``op``
    and ``op_type`` name the use it was read from."""

    name: str
    role: str
    op: str
    op_type: str
    lo: float = 0.0
    hi: float = 0.0

    def describe(self) -> str:
        """The report's line: what was inferred, from which op."""
        if self.role == INDICES:
            rows = int(self.hi) + 1
            return (f"{self.name}: ids in [0, {rows - 1}] — {self.op_type} {self.op!r} "
                    f"indexes a {rows}-row table")
        if self.role == MASK:
            return f"{self.name}: a mask — it gates {self.op_type} {self.op!r}"
        return (f"{self.name}: integers for arithmetic (any value of its dtype) — "
                f"{self.op_type} {self.op!r} computes with it")


def infer_roles(program: Any, function: str = "main") -> list[InputRole]:
    """The role of every input of ``function`` the graph tells (inputs it does not tell
    are left out): an index role wins over a mask, a mask over arithmetic, and an input
    indexing several tables takes the smallest."""
    block = program.functions[function]
    roles = []
    for name, var in block.inputs.items():
        dtype = np.dtype(_numpy_dtype(var))
        if dtype.kind not in "iub":
            continue
        indexers = sorted(_indexers(var), key=lambda found: found[1])
        if indexers and dtype.kind != "b":
            op, rows = indexers[0]
            roles.append(InputRole(name, INDICES, op.name, op.op_type, 0.0, float(rows - 1)))
            continue
        gate = _first(_gates(var))
        if gate is not None:
            roles.append(InputRole(name, MASK, gate.name, gate.op_type))
            continue
        arithmetic = _first(_arithmetic(var)) if dtype.kind != "b" else None
        if arithmetic is not None:
            roles.append(InputRole(name, ARITHMETIC, arithmetic.name, arithmetic.op_type))
    return roles


def _first(found: Iterator[Any]) -> Any:
    return next(found, None)


def _numpy_dtype(var: Any) -> Any:
    from coremltools.converters.mil.mil import types

    return types.nptype_from_builtin(var.dtype)


def _uses(var: Any) -> Iterator[tuple[str, Any]]:
    """(argument name, op) for every op that reads ``var``."""
    for op in var.child_ops:
        for key, value in op.inputs.items():
            if value is var or (isinstance(value, (list, tuple)) and any(v is var for v in value)):
                yield key, op


def _walk(var: Any, follow: Any) -> Iterator[tuple[str, Any]]:
    """Every (argument, op) reading ``var`` or a value ``follow(key, op)`` says carries
    it, breadth first, each op once."""
    frontier, seen = [var], set()
    while frontier:
        current = frontier.pop(0)
        for key, op in _uses(current):
            yield key, op
            if id(op) not in seen and follow(key, op):
                seen.add(id(op))
                frontier.extend(op.outputs)


def _carries_index(key: str, op: Any) -> bool:
    if op.op_type in _CARRIERS:
        return op.op_type != "select" or key in ("a", "b")
    return op.op_type in _SHIFTS and _constant_operand(op)


def _constant_operand(op: Any) -> bool:
    return any(v.val is not None for v in (op.inputs.get("x"), op.inputs.get("y")) if v is not None)


def _indexers(var: Any) -> Iterator[tuple[Any, int]]:
    """(op, rows) for every indexing op the input's values reach as indices."""
    for key, op in _walk(var, _carries_index):
        if op.op_type in _INDEXERS and key == "indices":
            rows = _rows(op)
            if rows:
                yield op, rows


def _rows(op: Any) -> int:
    """How many valid index values ``op`` admits (0 when its table's size is symbolic)."""
    if op.op_type == "one_hot":
        size = op.one_hot_vector_size.val
        return int(size) if size is not None else 0
    shape = op.x.shape
    if op.op_type == "gather_nd":
        depth = op.indices.shape[-1]
        dims = shape[:depth] if isinstance(depth, int) else ()
    else:
        axis = int(op.axis.val) if op.axis.val is not None else 0
        dims = (shape[axis],)
    sizes = [d for d in dims if isinstance(d, (int, np.integer))]
    return int(min(sizes)) if sizes and len(sizes) == len(dims) else 0


def _carries_mask(key: str, op: Any) -> bool:
    if op.op_type in _INDEXERS:
        return key not in ("indices",)
    return op.op_type not in _GATES


def _gates(var: Any) -> Iterator[Any]:
    """The ops where the input takes effect as a mask: a softmax (or attention) its
    values reach, or a select it is the condition of, through anything but an index."""
    for key, op in _walk(var, _carries_mask):
        if op.op_type in _GATES or (op.op_type == "select" and key == "cond"):
            yield op


def _arithmetic(var: Any) -> Iterator[Any]:
    """Ops that compute with the input's value (through casts: a converter that moves
    integer arithmetic to floats still computes with the integer)."""
    for _key, op in _walk(var, lambda _key, op: op.op_type in _CARRIERS):
        if op.op_type in _ARITHMETIC:
            yield op

"""Tracing shape vectors through a MIL graph (for ``meanpool-static-shape``).

coremltools computes an ``expand`` target at run time: ``concat`` of constants and of
``gather(cast(shape(v)), i)`` scalars. Tracing those back gives, per axis, either an int
or the (var, axis) whose size it is — enough to prove what a ``tile`` repeats, and to
rebuild the size from the same var without the casts that hide it from type inference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nebisect.fixes._mil import producer

Dim = Any  # an int or a sympy symbol


@dataclass(frozen=True)
class Size:
    """One element of a traced shape vector; ``origin.shape[axis]`` when read from a var."""

    value: Dim
    origin: Any = None
    axis: int = -1


def same(a: Dim, b: Dim) -> bool:
    """Statically equal sizes: equal ints, or the same symbol."""
    try:
        return bool(a == b)
    except TypeError:
        return False


def symbolic(size: Dim) -> bool:
    return not isinstance(size, (int, np.integer))


def expand_target(reps: Any, source: Any) -> list[Size] | None:
    """The shape ``tile(source, reps)`` expands to, if ``reps`` is coremltools' idiom
    ``real_div(select(equal(S, −1), shape(source), S), shape(source))`` (``−1`` keeps the
    source's size); None for any other reps."""
    while producer(reps, "cast") is not None:
        reps = reps.op.x
    div = producer(reps, "real_div")
    if div is None or not _is_shape_of(div.y, source):
        return None
    select = producer(div.x, "select")
    if select is None or not _is_shape_of(select.a, source):
        return None
    equal = producer(select.cond, "equal")
    if equal is None or equal.x is not select.b or _scalar_int(equal.y) != -1:
        return None
    sizes = _vector(select.b)
    if sizes is None or len(sizes) != source.rank:
        return None
    return [
        Size(have, source, axis) if same(size.value, -1) else size
        for axis, (size, have) in enumerate(zip(sizes, source.shape, strict=True))
    ]


def _is_shape_of(var: Any, source: Any) -> bool:
    shape = producer(var, "shape")
    return shape is not None and shape.x is source


def _vector(var: Any) -> list[Size] | None:
    """Elements of a 1-d int shape vector, traced through casts, shapes and concats."""
    if var.val is not None:
        return [Size(int(v)) for v in np.atleast_1d(var.val)]
    op = var.op
    if op is None:
        return None
    if op.op_type == "cast":
        return _vector(op.x)
    if op.op_type == "shape":
        return [Size(d, op.x, i) for i, d in enumerate(op.x.shape)]
    if op.op_type == "concat" and int(op.axis.val) == 0:
        sizes: list[Size] = []
        for part in op.values:
            piece = _vector(part) if part.rank == 1 else _scalar(part)
            if piece is None:
                return None
            sizes += piece
        return sizes
    return None


def _scalar(var: Any) -> list[Size] | None:
    """A scalar size traced through casts and ``gather(shape_vector, i)``, as a 1-list."""
    if var.val is not None:
        return [Size(int(var.val))]
    op = var.op
    if op is not None and op.op_type == "cast":
        return _scalar(op.x)
    if op is not None and op.op_type == "gather" and op.indices.val is not None:
        vector = _vector(op.x)
        index = int(op.indices.val)
        if vector is not None and -len(vector) <= index < len(vector):
            return [vector[index]]
    return None


def _scalar_int(var: Any) -> int | None:
    value = var.val
    return None if value is None or np.asarray(value).size != 1 else int(np.asarray(value))

"""``meanpool-static-shape``: drop the data-dependent ``tile`` that materializes a broadcast.

Why: the masked mean-pool ``mask.unsqueeze(-1).expand(tokens.size())`` is lowered by
coremltools to a ``tile`` whose repetitions are computed at run time
(``real_div(select(equal(S, −1), shape(x), S), shape(x))``). MIL type inference cannot
see through it, so every shape downstream becomes a fresh symbol and the pooled output
is typed ``(is29, H)`` instead of ``(1, H)``. Core ML then refuses the model on non-CPU
units ("Invalid blob shape: Data-dependent shapes were disabled: var_39 - [?, 768]")
and segfaults in a full encoder (seed 003). The tile only repeats size-1 axes, and every
consumer broadcasts anyway, so feeding the un-tiled mask is exact and static.

Before::

    mask (1,S,1) ──► tile(reps = target / shape(mask)) ──► cast ──► m (?,?,?)
    m ──► mul(tokens, m) ──► reduce_sum(1) ──────────────┐
    m ──► reduce_sum(1) ──► clip ─────────────────► real_div ──► y (?, H)

After::

    mask (1,S,1) ──► cast ──► m (1,S,1)
    m ──► mul(tokens, m) ──► reduce_sum(1) ──────────────┐
    m ──► reduce_sum(1) ──► clip ─────────────────► real_div ──► y (1, H)

Guards (each a reason to leave the graph alone): the reps are not constant and have the
coremltools ``expand`` shape; the target shape resolves per axis to an int or a known
symbol, and every repeated axis has size 1 in the input; from the tile, only casts,
unary elementwise ops and reductions follow (a ``reduce_sum``/``reduce_prod`` never over
a repeated axis), until a binary elementwise op whose other operand already has the
repeated size on every repeated axis — so the result is bit-identical; nothing on the
way is a block output; everything downstream lives in the same block.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.fixes import register_fix
from nebisect.fixes._mil import keeps_dims, producer, reduced_axes
from nebisect.fixes.base import GraphFix

#: Ops that keep the shape of their one tensor input.
_UNARY = frozenset({
    "cast", "clip", "abs", "exp", "log", "sqrt", "rsqrt", "inverse", "relu", "sigmoid",
    "tanh", "square", "floor", "ceil", "round", "sign", "threshold",
})
#: Elementwise binary ops (numpy-style broadcasting).
_BINARY = frozenset({
    "add", "sub", "mul", "real_div", "floor_div", "maximum", "minimum", "pow", "mod",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_and", "logical_or", "logical_xor",
})
#: Reductions, and those whose value changes when taken over a repeated axis.
_REDUCTIONS = frozenset({"reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"})
_COUNTING = frozenset({"reduce_sum", "reduce_prod"})

Dim = Any  # an int or a sympy symbol


@register_fix
class MeanpoolStaticShape(GraphFix):
    """Remove the masked mean-pool's data-dependent tile so the pooled shape is static."""

    name = "meanpool-static-shape"
    anchors = ("tile",)
    cures = ("error:predict:Invalid blob shape", "crash:SIGSEGV")

    def rewrite(self, op: Any, block: Any) -> bool:
        if op.reps.val is not None:
            return False
        source = op.x
        target = _expand_target(op.reps, source)
        if target is None:
            return False
        repeated = {
            axis: size for axis, (size, have) in enumerate(zip(target, source.shape, strict=True))
            if not _same(size, have)
        }
        if any(not _same(source.shape[axis], 1) for axis in repeated):
            return False
        tiled = op.outputs[0]
        if not _broadcast_safe(tiled, repeated, block):
            return False
        downstream = _downstream(tiled)
        if any(later.enclosing_block is not block or later.blocks for later in downstream):
            return False
        block.replace_uses_of_var_after_op(
            anchor_op=op, old_var=tiled, new_var=source, no_check_var_types=True
        )
        for later in block.operations:
            if later in downstream:
                later.type_value_inference(overwrite_output=True)
        block.remove_ops([op])
        return True


def _same(a: Dim, b: Dim) -> bool:
    """Statically equal sizes: equal ints, or the same symbol."""
    try:
        return bool(a == b)
    except TypeError:
        return False


def _expand_target(reps: Any, source: Any) -> list[Dim] | None:
    """The shape ``tile`` expands ``source`` to, if ``reps`` is coremltools' expand idiom."""
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
    dims = _vector_dims(select.b)
    if dims is None or len(dims) != source.rank:
        return None
    return [
        have if _same(size, -1) else size
        for size, have in zip(dims, source.shape, strict=True)
    ]


def _is_shape_of(var: Any, source: Any) -> bool:
    shape = producer(var, "shape")
    return shape is not None and shape.x is source


def _vector_dims(var: Any) -> list[Dim] | None:
    """Elements of a 1-d int shape vector as ints or symbols, traced through the graph."""
    if var.val is not None:
        return [int(v) for v in np.atleast_1d(var.val)]
    op = var.op
    if op is None:
        return None
    if op.op_type == "cast":
        return _vector_dims(op.x)
    if op.op_type == "shape":
        return list(op.x.shape)
    if op.op_type == "concat" and int(op.axis.val) == 0:
        dims: list[Dim] = []
        for part in op.values:
            piece = _vector_dims(part) if part.rank == 1 else _scalar_dims(part)
            if piece is None:
                return None
            dims += piece
        return dims
    return None


def _scalar_dims(var: Any) -> list[Dim] | None:
    """A scalar size traced through casts and ``gather(shape_vector, i)``, as a 1-list."""
    if var.val is not None:
        return [int(var.val)]
    op = var.op
    if op is not None and op.op_type == "cast":
        return _scalar_dims(op.x)
    if op is not None and op.op_type == "gather" and op.indices.val is not None:
        vector = _vector_dims(op.x)
        index = int(op.indices.val)
        if vector is not None and -len(vector) <= index < len(vector):
            return [vector[index]]
    return None


def _scalar_int(var: Any) -> int | None:
    value = var.val
    return None if value is None or np.asarray(value).size != 1 else int(np.asarray(value))


def _broadcast_safe(var: Any, repeated: dict[int, Dim], block: Any) -> bool:
    """True when every use of ``var`` yields the same values if its repeated axes are 1."""
    if var in block.outputs or not var.child_ops:
        return False
    for child in var.child_ops:
        kind = child.op_type
        if kind in _UNARY and child.x is var:
            ok = _broadcast_safe(child.outputs[0], repeated, block)
        elif kind in _REDUCTIONS and child.x is var:
            ok = _reduction_safe(child, repeated, block)
        elif kind in _BINARY:
            other = child.y if child.x is var else child.x
            ok = other is not var and _covers(other, repeated, var.rank)
        else:
            ok = False
        if not ok:
            return False
    return True


def _reduction_safe(op: Any, repeated: dict[int, Dim], block: Any) -> bool:
    axes = reduced_axes(op)
    if op.op_type in _COUNTING and set(axes) & set(repeated):
        return False
    if keeps_dims(op):
        remaining = {a: s for a, s in repeated.items() if a not in axes}
    else:
        kept = [a for a in range(op.x.rank) if a not in axes]
        remaining = {kept.index(a): s for a, s in repeated.items() if a in kept}
    if not remaining:
        return True
    return _broadcast_safe(op.outputs[0], remaining, block)


def _covers(other: Any, repeated: dict[int, Dim], rank: int) -> bool:
    """``other`` already has the repeated size on each repeated axis (right-aligned)."""
    shape = other.shape if other.rank else ()
    offset = rank - len(shape)
    for axis, size in repeated.items():
        position = axis - offset
        if position < 0 or not _same(shape[position], size):
            return False
    return True


def _downstream(var: Any) -> set[Any]:
    """Every op that (transitively) reads ``var``."""
    seen: set[Any] = set()
    frontier = list(var.child_ops)
    while frontier:
        op = frontier.pop()
        if op in seen:
            continue
        seen.add(op)
        for out in op.outputs:
            frontier.extend(out.child_ops)
    return seen

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

    mask (1,S,1) ──► [slice_by_size to len(tokens)] ──► cast ──► m (1,S,1)
    m ──► mul(tokens, m) ──► reduce_sum(1) ──────────────┐
    m ──► reduce_sum(1) ──► clip ─────────────────► real_div ──► y (1, H)

Guards (each a reason to leave the graph alone): the reps are not constant and have the
coremltools ``expand`` shape; the target shape resolves per axis to an int or a symbol,
and every axis the tile repeats has size 1 in the input; from the tile, only casts,
unary elementwise ops and reductions follow (a ``reduce_sum``/``reduce_prod`` never over
a repeated axis), until a binary elementwise op whose other operand already has the
repeated size on every repeated axis — so the values are unchanged; nothing on the way
is a block output; everything downstream lives in the same block.

Contract: an axis where the mask and the target both have a *symbolic* size is the
sequence length they share. The torch model declares it (torch.export's shared ``Dim``;
a tokenizer emits ids and mask together), but an ``.mlpackage`` cannot — its inputs get
independent ranges (``is0``, ``is1``), and a ``mul`` of the two would get a fresh
symbol bound to no input. So the mask is sliced to the length read from the target's
own var (``slice_by_size(mask, 0, [-1, len(tokens), -1])``; ``reshape`` would not do:
its type inference solves the new length back in terms of the mask's). Equal lengths
give the same values under one input-bound symbol; a shorter mask fails loudly
instead of being broadcast and pooled differently.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.fixes import register_fix
from nebisect.fixes._mil import builder
from nebisect.fixes._shapes import Dim, Size, expand_target, same, symbolic
from nebisect.fixes.base import GraphFix
from nebisect.mil.patterns import keeps_dims, reduced_axes

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


@register_fix
class MeanpoolStaticShape(GraphFix):
    """Remove the masked mean-pool's data-dependent tile so the pooled shape is static."""

    name = "meanpool-static-shape"
    anchors = ("tile",)
    cures = ("error:predict:*Invalid blob shape*", "crash:SIGSEGV")

    def rewrite(self, op: Any, block: Any) -> bool:
        if op.reps.val is not None:
            return False
        source = op.x
        target = expand_target(op.reps, source)
        if target is None:
            return False
        tied: dict[int, Size] = {}
        repeated: dict[int, Dim] = {}
        for axis, (size, have) in enumerate(zip(target, source.shape, strict=True)):
            if same(size.value, have):
                continue
            if symbolic(size.value) and symbolic(have) and size.origin is not None:
                tied[axis] = size
            elif same(have, 1):
                repeated[axis] = size.value
            else:
                return False
        tiled = op.outputs[0]
        if not _broadcast_safe(tiled, repeated, block):
            return False
        downstream = _downstream(tiled)
        if any(later.enclosing_block is not block or later.blocks for later in downstream):
            return False
        untiled = _tie(source, tied, op) if tied else source
        block.replace_uses_of_var_after_op(
            anchor_op=op, old_var=tiled, new_var=untiled, no_check_var_types=True
        )
        for later in block.operations:
            if later in downstream:
                later.type_value_inference(overwrite_output=True)
        block.remove_ops([op])
        return True


def _tie(source: Any, tied: dict[int, Size], anchor: Any) -> Any:
    """``source`` sliced to the target's length on each tied axis (see *Contract*)."""
    mb = builder()
    stem = anchor.name
    pieces = []
    for axis in range(source.rank):
        if axis in tied:
            size = tied[axis]
            shape = mb.shape(x=size.origin, name=f"{stem}_shape{axis}", before_op=anchor)
            pieces.append(mb.gather(x=shape, indices=[size.axis], axis=0,
                                    name=f"{stem}_len{axis}", before_op=anchor))
        else:
            pieces.append(np.array([-1], np.int32))
    size = mb.concat(values=pieces, axis=0, name=f"{stem}_tied_size", before_op=anchor)
    begin = np.zeros(source.rank, np.int32)
    return mb.slice_by_size(x=source, begin=begin, size=size, name=f"{stem}_tied",
                            before_op=anchor)


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
        if position < 0 or not same(shape[position], size):
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

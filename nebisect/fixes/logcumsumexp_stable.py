"""``logcumsumexp-stable``: ``log(cumsum(exp(x)))`` → ``log(cumsum(exp(x − m))) + m``.

Why: coremltools lowers ``torch.logcumsumexp`` to the textbook ``log(cumsum(exp(x)))``;
in fp16 ``exp`` overflows to inf for any x > log 65504 ≈ 11.09 and every later prefix
becomes inf. Shifting by the maximum m along the scan axis keeps each ``exp`` in
(0, 1] and each prefix sum at most the axis length.

Before::

    x ──► exp ──► cumsum(axis, exclusive, reverse) ──► log ──► y

After::

    x ──┬──► reduce_max(axis, keep_dims=True) ──► m ────────────────────────┐
        │                                         │                         │
        └──────────────► sub(x, m) ◄──────────────┘                         ▼
                           └──► exp ──► cumsum(axis, exclusive, reverse) ──► log ──► add ──► y

One shift serves the whole axis, so a prefix whose elements all lie more than ≈ 17
below the axis maximum underflows to log 0 = −inf in fp16 (it overflowed to +inf the
other way before: the failure moves from the common large-logit case to a far tail).
Guards: ``log`` ← ``cumsum`` ← ``exp`` with floating, non-constant x; the ``log``'s
epsilon is negligible.
"""

from __future__ import annotations

from typing import Any

from nebisect.fixes import register_fix
from nebisect.fixes._mil import builder, is_float, negligible_epsilon, producer, replace
from nebisect.fixes.base import GraphFix


@register_fix
class LogcumsumexpStable(GraphFix):
    """Max-shift log(cumsum(exp(x))) so exp never overflows fp16."""

    name = "logcumsumexp-stable"
    anchors = ("log",)
    cures = ("mismatch:nonfinite",)

    def rewrite(self, op: Any, block: Any) -> bool:
        cumsum = producer(op.x, "cumsum")
        if cumsum is None or not negligible_epsilon(op):
            return False
        exp = producer(cumsum.x, "exp")
        if exp is None:
            return False
        x = exp.x
        if x.val is not None or not is_float(x):
            return False
        axis = int(cumsum.axis.val) % x.rank if cumsum.axis is not None else 0
        mb = builder()
        stem = op.name
        peak = mb.reduce_max(x=x, axes=[axis], keep_dims=True, name=f"{stem}_max",
                             before_op=op)
        shifted = mb.sub(x=x, y=peak, name=f"{stem}_shifted", before_op=op)
        exps = mb.exp(x=shifted, name=f"{stem}_exp", before_op=op)
        flags = {
            key: bool(getattr(cumsum, key).val)
            for key in ("exclusive", "reverse")
            if getattr(cumsum, key) is not None
        }
        prefix = mb.cumsum(x=exps, axis=axis, name=f"{stem}_cumsum", before_op=op, **flags)
        log_prefix = mb.log(x=prefix, name=f"{stem}_log", before_op=op)
        result = mb.add(x=log_prefix, y=peak, name=op.outputs[0].name, before_op=op)
        replace(op, result, block)
        return True

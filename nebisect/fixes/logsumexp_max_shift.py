"""``logsumexp-max-shift``: feed ``reduce_log_sum_exp`` inputs that are ≤ 0.

Why: the Neural Engine lowers ``reduce_log_sum_exp`` without the max-shift its own
documentation promises, so ``Σ exp(x)`` overflows fp16 once ``C · exp(max x) > 65504``
and the output collapses to 0.0 (seed 000 / coremltools #2690: 32 channels collapse at
x ≈ 7.63 = log(65504/32); the stack-of-2 variant at log 65504 ≈ 11.09). Shifting by the
maximum keeps every ``exp`` in (0, 1], so the sum is at most C whatever x is, while the
op itself — and its placement on the Neural Engine — stays. This is the seed's
"hybrid" workaround (3 added ops, all NE-placeable), done on the graph.

Before::

    x ──► reduce_log_sum_exp(axes, keep_dims) ──► y

After::

    x ──┬──► reduce_max(axes, keep_dims=True) ──────────────────────────┐ m
        │                                                                │
        └──► sub(x, m) ──► reduce_log_sum_exp(axes, keep_dims) ──► add ◄─┘ ──► y

    (when keep_dims is False, m passes through squeeze(axes) before the add)

Guards: floating, non-constant input; not already shifted — the same matcher lint uses
(:func:`nebisect.mil.patterns.is_max_shifted`: ``x0 − reduce_max(x0)`` over some of
these axes, through casts that keep the shift), so the pass is idempotent and rewrites
exactly what ``lse-no-max-shift`` flags. A reduction whose maximum is
±inf yields NaN (inf − inf), exactly as the seed's workaround does.
"""

from __future__ import annotations

from typing import Any

from nebisect.fixes import register_fix
from nebisect.fixes._mil import builder, is_float, replace
from nebisect.fixes.base import GraphFix
from nebisect.mil.patterns import is_max_shifted, keeps_dims, reduced_axes


@register_fix
class LogsumexpMaxShift(GraphFix):
    """Max-shift reduce_log_sum_exp so Σexp cannot overflow fp16 (seed 000's cliff)."""

    name = "logsumexp-max-shift"
    anchors = ("reduce_log_sum_exp",)
    cures = ("mismatch:collapse", "mismatch:nonfinite")

    def rewrite(self, op: Any, block: Any) -> bool:
        x = op.x
        if x.val is not None or not is_float(x):
            return False
        if is_max_shifted(op):
            return False
        axes = reduced_axes(op)
        mb = builder()
        keep = keeps_dims(op)
        stem = op.name
        peak = mb.reduce_max(x=x, axes=axes, keep_dims=True, name=f"{stem}_max", before_op=op)
        shifted = mb.sub(x=x, y=peak, name=f"{stem}_shifted", before_op=op)
        lse = mb.reduce_log_sum_exp(
            x=shifted, axes=axes, keep_dims=keep, name=f"{stem}_lse", before_op=op
        )
        if not keep:
            peak = mb.squeeze(x=peak, axes=axes, name=f"{stem}_max_squeezed", before_op=op)
        result = mb.add(x=lse, y=peak, name=op.outputs[0].name, before_op=op)
        replace(op, result, block)
        return True


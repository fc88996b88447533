"""``softplus-stable``: ``softplus(x)`` → ``max(x, 0) + log(1 + exp(−|x|))``.

Why: the Neural Engine's ``softplus`` evaluates ``log(1 + exp(x))`` with an internal
range of 2^15, so its output collapses to 0.0 once x > ln 2^15 ≈ 10.397 (coremltools
#2687; observed between 10.394 and 10.395, seed 000's cross-op table). In the rewritten
form ``exp`` only ever sees −|x| ≤ 0, so nothing can overflow, and every op (relu, abs,
mul, exp, add, log) is an ordinary elementwise op the Neural Engine runs.

Before::

    x ──► softplus ──► y

After::

    x ──┬──► relu ───────────────────────────────────────────────┐
        │                                                         ▼
        └──► abs ──► mul(−1) ──► exp ──► add(1) ──► log ──────► add ──► y

Accuracy: for x < 0 the second term is ``log(1 + tiny)``, which fp16 rounds to 0 once
exp(x) < 2^-11 — an absolute error below 4.9e-4 (half an fp16 ULP at 1), not a cliff.
Guards: floating input that is not a constant. ``softplus_parametric`` is left alone.
"""

from __future__ import annotations

from typing import Any

from nebisect.fixes import register_fix
from nebisect.fixes._mil import builder, is_float, replace, typed
from nebisect.fixes.base import GraphFix


@register_fix
class SoftplusStable(GraphFix):
    """Rewrite softplus as max(x,0) + log(1 + exp(−|x|)) (no overflow past ln 2^15)."""

    name = "softplus-stable"
    anchors = ("softplus",)
    cures = ("mismatch:collapse", "mismatch:nonfinite")

    def rewrite(self, op: Any, block: Any) -> bool:
        x = op.x
        if x.val is not None or not is_float(x):
            return False
        mb = builder()
        stem = op.name
        positive = mb.relu(x=x, name=f"{stem}_relu", before_op=op)
        magnitude = mb.abs(x=x, name=f"{stem}_abs", before_op=op)
        negated = mb.mul(x=magnitude, y=typed(x, -1.0), name=f"{stem}_neg", before_op=op)
        decay = mb.exp(x=negated, name=f"{stem}_exp", before_op=op)
        one_plus = mb.add(x=decay, y=typed(x, 1.0), name=f"{stem}_1p", before_op=op)
        tail = mb.log(x=one_plus, name=f"{stem}_log", before_op=op)
        result = mb.add(x=positive, y=tail, name=op.outputs[0].name, before_op=op)
        replace(op, result, block)
        return True

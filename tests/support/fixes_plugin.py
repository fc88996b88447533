"""Deliberately wrong fixes, for proving that ``fix verify`` catches them.

Imported by the test and, through ``fix_job``'s ``modules``, in the isolated child that
applies them — a plugin fix registers itself on import like a built-in one.
"""

from __future__ import annotations

from typing import Any

from nebisect.fixes import register_fix
from nebisect.fixes._mil import builder, producer, replace
from nebisect.fixes.base import GraphFix


@register_fix
class SoftplusAsRelu(GraphFix):
    """Wrong on purpose: softplus → relu (no cliff, but not the same function)."""

    name = "test-softplus-as-relu"
    anchors = ("softplus",)
    cures = ("mismatch:collapse",)

    def rewrite(self, op: Any, block: Any) -> bool:
        result = builder().relu(x=op.x, name=op.outputs[0].name, before_op=op)
        replace(op, result, block)
        return True


@register_fix
class LogsumexpOnCpu(GraphFix):
    """Wrong on purpose: compute reduce_log_sum_exp in fp32 — it falls back to the CPU."""

    name = "test-logsumexp-fp32"
    anchors = ("reduce_log_sum_exp",)
    cures = ("mismatch:collapse",)

    def rewrite(self, op: Any, block: Any) -> bool:
        if producer(op.x, "cast") is not None:
            return False
        mb = builder()
        wide = mb.cast(x=op.x, dtype="fp32", name=f"{op.name}_fp32", before_op=op)
        lse = mb.reduce_log_sum_exp(x=wide, axes=op.axes, keep_dims=op.keep_dims,
                                    name=f"{op.name}_wide", before_op=op)
        result = mb.cast(x=lse, dtype="fp16", name=op.outputs[0].name, before_op=op)
        replace(op, result, block)
        return True

"""``log-softmax-stable``: ``log(softmax(x))`` → ``x − max − log Σ exp(x − max)``.

Why: coremltools 9.0 converts ``torch.log_softmax`` to ``log(softmax(x))``. In fp16 a
probability below the smallest subnormal (≈ 6e-8, i.e. a logit 17 below the maximum)
rounds to 0 and ``log`` turns it into −inf, where the true log-probability is an
ordinary finite number. Computing in the log domain never forms the probability: the
shifted logits are ≤ 0, ``Σ exp`` lies in [1, C], and the result is finite for every
finite input.

Before::

    x ──► softmax(axis) ──► log ──► y

After::

    x ──┬──► reduce_max(axis, keep_dims=True) ──► m
        │                                         │
        └──────────────► sub(x, m) ◄──────────────┘
                           │  s
                           ├──► exp ──► reduce_sum(axis, keep_dims=True) ──► log ──► l
                           ▼                                                         │
                        sub(s, l) ◄──────────────────────────────────────────────────┘
                           │
                           ▼
                           y

Guards: the ``log`` reads a ``softmax`` output; floating, non-constant logits; the
``log``'s epsilon is coremltools' negligible default (a real epsilon changes the math).
A softmax that feeds other ops as well stays for them.
"""

from __future__ import annotations

from typing import Any

from nebisect.fixes import register_fix
from nebisect.fixes._mil import builder, is_float, negligible_epsilon, producer, replace
from nebisect.fixes.base import GraphFix


@register_fix
class LogSoftmaxStable(GraphFix):
    """Compute log(softmax(x)) in the log domain (no −inf from underflowed probabilities)."""

    name = "log-softmax-stable"
    anchors = ("log",)
    cures = ("mismatch:nonfinite", "mismatch:tolerance")

    def rewrite(self, op: Any, block: Any) -> bool:
        softmax = producer(op.x, "softmax")
        if softmax is None or not negligible_epsilon(op):
            return False
        logits = softmax.x
        if logits.val is not None or not is_float(logits):
            return False
        axis = int(softmax.axis.val) % logits.rank if softmax.axis is not None else logits.rank - 1
        mb = builder()
        stem = op.name
        peak = mb.reduce_max(x=logits, axes=[axis], keep_dims=True, name=f"{stem}_max",
                             before_op=op)
        shifted = mb.sub(x=logits, y=peak, name=f"{stem}_shifted", before_op=op)
        exps = mb.exp(x=shifted, name=f"{stem}_exp", before_op=op)
        total = mb.reduce_sum(x=exps, axes=[axis], keep_dims=True, name=f"{stem}_sum",
                              before_op=op)
        log_total = mb.log(x=total, name=f"{stem}_logsum", before_op=op)
        result = mb.sub(x=shifted, y=log_total, name=op.outputs[0].name, before_op=op)
        replace(op, result, block)
        return True

"""Log-domain patterns that leave the log domain: ``log(softmax(x))`` and
``log(cumsum(exp(x)))``.

coremltools 9.0 converts ``log_softmax`` and ``logcumsumexp`` into exactly these
chains. ``softmax`` is computed stably, but its small probabilities underflow to 0 in
fp16 (below ~6e-8) and ``log(0) = −inf``; ``exp(x)`` before a cumulative sum overflows
fp16 at x > 11.09 and the whole tail becomes inf/NaN. Both are errors in fp16 and
warnings in fp32, where the same happens only for logit gaps beyond ~100.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nebisect.hazards.graph import ProgramView
from nebisect.hazards.records import LintFinding
from nebisect.hazards.registry import finding, lint_rule


def _severity(view: ProgramView, *ops: Any) -> str:
    return "error" if any(view.is_fp16(op.outputs[0]) for op in ops) else "warning"


@lint_rule(
    "log-of-softmax",
    severity="error",
    title="log(softmax(x)) instead of a stable log-softmax",
    rationale=(
        "softmax probabilities below the fp16 subnormal range round to 0 and log(0) "
        "is -inf: log_softmax of a confident classifier returns -inf on the Neural "
        "Engine."
    ),
    source="coremltools issue #2728",
    fix="log-softmax-stable",
)
def log_of_softmax(view: ProgramView) -> Iterator[LintFinding]:
    for op in view.ops("log"):
        softmax = view.producer(op.inputs["x"], "softmax")
        if softmax is None:
            continue
        yield finding(
            view, "log-of-softmax", op,
            f"log '{op.name}' of softmax '{softmax.name}': probabilities that underflow "
            "to 0 become -inf; compute x - max - log(Σexp(x - max)) instead",
            severity=_severity(view, op, softmax),
        )


@lint_rule(
    "log-cumsum-exp",
    severity="error",
    title="log(cumsum(exp(x))) without a max-shift",
    rationale=(
        "exp(x) overflows fp16 for x > log(65504) ≈ 11.09 before the cumulative sum: "
        "logcumsumexp returns inf then NaN on the Neural Engine."
    ),
    source="coremltools issue #2729",
    fix="logcumsumexp-stable",
)
def log_cumsum_exp(view: ProgramView) -> Iterator[LintFinding]:
    for op in view.ops("log"):
        cumsum = view.producer(op.inputs["x"], "cumsum")
        if cumsum is None:
            continue
        exp = view.producer(cumsum.inputs["x"], "exp")
        if exp is None or view.max_shift(exp.inputs["x"]) is not None:
            continue
        yield finding(
            view, "log-cumsum-exp", op,
            f"log '{op.name}' of cumsum '{cumsum.name}' of exp '{exp.name}' without a "
            "max-shift: exp(x) overflows fp16 for x > 11.09; use "
            "m + log(cumsum(exp(x - m))) with m = max(x)",
            severity=_severity(view, op, cumsum, exp),
        )

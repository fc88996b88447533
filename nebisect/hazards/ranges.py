"""fp16 overflow proven from declared input ranges (``--input-range x=-15:15``).

The pattern rules say "this op *can* collapse"; this rule says "with your inputs it
*does*". It reads the interval analysis (:mod:`nebisect.hazards.interval`) and reports
the first op on each path whose fp16 value — or the intermediate its textbook lowering
computes, such as ``Σ exp(x)`` inside ``reduce_log_sum_exp`` — leaves the fp16 range
while all its inputs are still inside it. Downstream ops of an overflow are not
reported again. An error means the bound is attained by an input inside the declared
ranges (every element at a range end); a bound that is only an upper bound is a
warning.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from nebisect.hazards.graph import ProgramView
from nebisect.hazards.interval import Interval, analyze, even_power
from nebisect.hazards.overflow import SOFTPLUS_NE_CLIFF
from nebisect.hazards.records import LintFinding
from nebisect.hazards.registry import finding, lint_rule
from nebisect.mil.dtypes import FP16_MAX


@dataclass(frozen=True)
class Intermediate:
    """A value a naive lowering computes inside one op, and the limit it must stay under."""

    what: str
    bound: float
    limit: float
    exact: bool


#: exp() arguments are capped here so float64 stays finite (e^700 ≫ any fp16 limit).
_EXP_CAP = 700.0

Internal = Callable[[ProgramView, Any, Interval], "Intermediate | None"]


def _lse_sum(view: ProgramView, op: Any, x: Interval) -> Intermediate | None:
    size = view.reduced_size(op)
    if size is None:
        return None
    with_exp = size * math.exp(min(x.hi, _EXP_CAP))
    return Intermediate(f"Σexp(x) over {size} elements (no max-shift)", with_exp, FP16_MAX,
                        x.hi_exact)


def _softplus_exp(view: ProgramView, op: Any, x: Interval) -> Intermediate | None:
    return Intermediate(
        "exp(x) (the Neural Engine's softplus limit is 2^15)",
        math.exp(min(x.hi, _EXP_CAP)), math.exp(SOFTPLUS_NE_CLIFF), x.hi_exact,
    )


def _sum_of_squares(view: ProgramView, op: Any, x: Interval) -> Intermediate | None:
    size = view.reduced_size(op)
    if size is None:
        return None
    squares = even_power(x, 2)
    return Intermediate(f"Σx² over {size} elements", size * squares.hi, FP16_MAX,
                        squares.hi_exact)


#: Intermediates of textbook lowerings, by op type.
OP_INTERNALS: dict[str, Internal] = {
    "reduce_log_sum_exp": _lse_sum,
    "softplus": _softplus_exp,
    "reduce_sum_square": _sum_of_squares,
    "reduce_l2_norm": _sum_of_squares,
}


def _operands(view: ProgramView, op: Any) -> Iterator[tuple[Any, bool]]:
    """(var, is_constant) for every float input of ``op``."""
    for value in op.inputs.values():
        for var in value if isinstance(value, (list, tuple)) else (value,):
            if view.is_float(var):
                yield var, var.op is not None and var.op.op_type == "const"


def _ranges_text(view: ProgramView) -> str:
    return ", ".join(f"{n} ∈ [{r.lo:g}, {r.hi:g}]" for n, r in sorted(view.input_ranges.items()))


@lint_rule(
    "fp16-range-overflow",
    severity="error",
    title="fp16 overflow proven from the declared input ranges",
    rationale=(
        "Forward interval propagation from --input-range bounds every fp16 value; a "
        "bound above 65504 that inputs inside the ranges attain is an overflow to inf "
        "(or, inside a naive lowering, a collapse to 0)."
    ),
    source="coremltools issues #2690 and #2687 (fp16 overflow inside exp-based lowerings)",
    remedy="apply the fix of the op's pattern rule, rescale the values feeding it, or "
    "keep the op in fp32",
)
def proven_overflow(view: ProgramView) -> Iterator[LintFinding]:
    if not view.input_ranges:
        return
    intervals = analyze(view)
    tainted: set[int] = set()
    for op in view.ops():
        out = op.outputs[0]
        operands = list(_operands(view, op))
        bounds = [intervals.get(id(v)) for v, _ in operands]
        if any(id(v) in tainted or (b is not None and b.magnitude > FP16_MAX)
               for (v, _), b in zip(operands, bounds, strict=True)):
            tainted.update(id(v) for v in op.outputs)
            continue
        data = [b for (_, constant), b in zip(operands, bounds, strict=True) if not constant]
        known = [b for b in data if b is not None]
        if not view.is_float(out) or not view.is_fp16(out) or not known or known != data:
            continue
        found = _overflow(view, op, known[0], intervals.get(id(out)))
        if found is None:
            continue
        tainted.update(id(v) for v in op.outputs)
        attained = (
            "attained when every input element sits at a declared range end"
            if found.exact else "an upper bound that is not shown to be attained"
        )
        yield finding(
            view, "fp16-range-overflow", op,
            f"with {_ranges_text(view)}, {op.op_type} '{op.name}': {found.what} reaches "
            f"{found.bound:.4g} > {found.limit:.6g} in fp16 ({attained})",
            severity="error" if found.exact else "warning",
            bound=found.bound, limit=found.limit, exact=found.exact,
        )


def _overflow(
    view: ProgramView, op: Any, first: Interval, output: Interval | None
) -> Intermediate | None:
    internal = OP_INTERNALS.get(op.op_type)
    if internal is not None:
        found = internal(view, op, first)
        if found is not None and found.bound > found.limit:
            return found
    if output is None or output.magnitude <= FP16_MAX:
        return None
    exact = output.hi_exact if abs(output.hi) >= abs(output.lo) else output.lo_exact
    return Intermediate("the output", output.magnitude, FP16_MAX, exact)

"""Guided probes: the input magnitudes at which lint says a hazard op leaves the fp16 range.

``nebisect lint --input-range x=-m:m`` already proves, by interval analysis, whether
some op's fp16 value — or the intermediate its textbook lowering computes, such as
Σexp(x) inside ``reduce_log_sum_exp`` — overflows for inputs in [-m, m]. Run backwards,
that answers the question discovery needs first: *from which magnitude on* does each
hazard op overflow? Seed 000's model answers x > log(65504/32) ≈ 7.6241, its softplus
twin x > ln 2^15 ≈ 10.397 (the Neural Engine's published cliff). The explorer
evaluates those magnitudes first, so a static warning becomes a confirmed (or refuted)
finding, and a localized cliff is shown beside the boundary theory predicts.

This module is thin over lint: each question is one run of the ``fp16-range-overflow``
rule (:mod:`nebisect.hazards.ranges`) with a symmetric range on one input, and the search
is a scan over powers of two followed by a bisection. The op's own formula (the
"log(65504/32)" label) comes from the fuzzer's op specs, which own those formulas.

API::

    guided_probes(program, *, assume_fp16=True) -> list[Probe]   # smallest magnitude first
    Probe.boundary() -> Boundary   # in the input's terms: explore(guided=[...])
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from nebisect.codec import Record
from nebisect.hazards.graph import ProgramView, Range
from nebisect.hazards.interval import analyze
from nebisect.hazards.records import LintFinding, Rule
from nebisect.hazards.registry import get_rule
from nebisect.opspecs.ops import get_op, registered_ops
from nebisect.search.cliff import PREDICTION_WINDOW, Boundary

#: magnitudes 2^k scanned before bisecting: fp16's normal range and one step beyond
SCAN_EXPONENTS = tuple(range(-14, 17))
#: halvings of a scan bracket [2^(k-1), 2^k]: a relative precision near 1e-12
BISECTIONS = 40


@dataclass(frozen=True)
class Probe(Record):
    """Where one hazard op overflows as one floating input grows.

    ``magnitude`` is the smallest |input| (every element at ±magnitude) at which lint's
    interval analysis shows ``op_name`` leaving the fp16 range; ``attained`` says the
    bound is reached by such an input (a constant fill), not merely an upper bound;
    ``theory`` is the op's own boundary formula at its input (e.g. log(65504/32)).
    """

    input: str
    magnitude: float
    op_name: str
    op_type: str
    attained: bool
    theory: Boundary

    @property
    def direct(self) -> bool:
        """The input reaches the op unscaled: the magnitude is the op's own boundary."""
        return abs(self.magnitude - self.theory.value) <= 1e-6 * max(1.0, abs(self.magnitude))

    def boundary(self) -> Boundary:
        """This probe as a boundary of the input's value, for the explorer and cliff reports."""
        label = self.theory.label if self.direct else (
            f"{self.theory.label} at {self.op_type} '{self.op_name}'"
        )
        why = f"{self.op_type} '{self.op_name}' leaves fp16 once |{self.input}| > " \
              f"{self.magnitude:.6g}: {self.theory.why}"
        return Boundary(label, self.magnitude, why)


def guided_probes(program: Any, *, assume_fp16: bool = True) -> list[Probe]:
    """Probes for every floating input of ``program`` (a coremltools MIL Program).

    ``assume_fp16`` (default on): fp32 values count as fp16, as on the Neural Engine,
    which computes everything in fp16 whatever the program declares.
    """
    view = ProgramView(program, assume_fp16=assume_fp16)
    rule = get_rule("fp16-range-overflow")
    names = dict.fromkeys(
        name for _, function in view.functions() for name, var in function.inputs.items()
        if view.is_float(var)
    )
    found = [probe for name in names for probe in _probes_of(view, rule, name)]
    return sorted(found, key=lambda p: (p.magnitude, p.input, p.op_name))


def _overflowing(
    view: ProgramView, rule: Rule, name: str, magnitude: float
) -> dict[str, LintFinding]:
    """The rule's findings (by op name) with ``name`` ranging over [-magnitude, magnitude]."""
    view.input_ranges = {name: Range(-magnitude, magnitude)}
    return {finding.op_name: finding for finding in rule.check(view)}


def _probes_of(view: ProgramView, rule: Rule, name: str) -> list[Probe]:
    """Scan 2^k upwards; bisect each op's first bracket (ops overflowing already at the
    smallest magnitude do not depend on this input's size and give no probe)."""
    scale = [2.0**k for k in SCAN_EXPONENTS]
    always = set(_overflowing(view, rule, name, scale[0]))
    brackets: dict[str, tuple[float, float]] = {}
    for lo, hi in itertools.pairwise(scale):
        for op_name in _overflowing(view, rule, name, hi):
            if op_name not in always:
                brackets.setdefault(op_name, (lo, hi))
    return [_bisect(view, rule, name, op_name, lo, hi) for op_name, (lo, hi) in brackets.items()]


def _bisect(view: ProgramView, rule: Rule, name: str, op_name: str, lo: float, hi: float) -> Probe:
    for _ in range(BISECTIONS):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if op_name in _overflowing(view, rule, name, mid) else (mid, hi)
    finding = _overflowing(view, rule, name, hi)[op_name]  # and the view's range is [-hi, hi]
    op = next(op for op in view.ops() if op.name == op_name)
    return Probe(name, hi, op_name, op.op_type, bool(finding.details.get("exact")),
                 _theory(view, op, finding))


def _theory(view: ProgramView, op: Any, finding: LintFinding) -> Boundary:
    """The op's boundary formula nearest to where its input sits at the overflow: the
    fuzzer's op spec owns the formulas (log(65504/C), ln 2^15, sqrt(65504/C), …)."""
    operand = op.inputs.get("x")
    interval = None if operand is None else analyze(view).get(id(operand))
    limit = f"{op.op_type} reaches {finding.details.get('limit', 65504.0):.6g}"
    if interval is None:
        return Boundary(limit, float("nan"), finding.message)
    at = interval.magnitude
    if op.op_type in registered_ops():
        shape = [int(d) if isinstance(d, (int, np.integer)) else 1 for d in operand.shape]
        spec = get_op(op.op_type)
        params = {"axes": view.reduce_axes(op)} if op.op_type.startswith("reduce_") else {}
        known = spec.boundaries({"inputs": {"x": shape}, "params": {**params,
                                                                    **spec.params_of(op)}})
        near = [b for b in known if abs(b.value - at) <= PREDICTION_WINDOW * max(1.0, abs(at))]
        if near:
            return min(near, key=lambda b: abs(b.value - at))
    return Boundary(limit, at, finding.message)

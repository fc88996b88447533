"""Findings by root cause: one law stated once, each reduction size's bracket beneath it."""

from __future__ import annotations

import math

from nebisect.fuzzing.campaign import Finding
from nebisect.fuzzing.causes import root_causes
from nebisect.fuzzing.reporting import cause_lines
from nebisect.search.cliff import Boundary, Cliff

OP = "reduce_log_sum_exp"
COLLAPSE = "mismatch:collapse"


def lse(n: int) -> Boundary:
    return Boundary(f"log(65504/{n})", math.log(65504 / n), "Σexp(x) over n equal values "
                    "overflows fp16 without the max-shift", "log(65504/n)")


def op_finding(axes: str, n: int, lo: float, hi: float, predicted: bool = True,
               signature: str = COLLAPSE) -> Finding:
    case = {"program": {"op": OP, "dtype": "fp16", "inputs": {"x": [1, n]},
                        "params": {"axes": [1], "keep_dims": False}, "wrap": "none"},
            "values": {"x": {"kind": "delta", "value": hi}}}
    cliff = Cliff(lo, hi, False, {"output": 11.0859375, "reference": 11.09},
                  {"output": 0.0, "reference": 11.09}, 17,
                  predicted=lse(n).to_dict() if predicted else None,
                  element={"output": "op_out", "index": [0]})
    return Finding(OP, f"{OP}/{axes}", signature, "mismatch", "", case, case, cliff=cliff)


def model_finding(path: str, family: str, lo: float, hi: float,
                  boundary: Boundary | None) -> Finding:
    case = {"path": path, "length": 0, "family": family, "x": hi}
    cliff = Cliff(lo, hi, False, {"output": 11.0}, {"output": 0.0}, 18,
                  predicted=None if boundary is None else boundary.to_dict())
    return Finding("logsumexp_ne.py:model", f"{path}/{family}/x/base", COLLAPSE, "mismatch",
                   "", case, case, cliff=cliff)


def test_one_law_over_several_reduction_sizes_is_one_finding_with_a_bracket_per_size() -> None:
    # Before: 8 findings, one table row per parameter class, the law never stated.
    findings = [op_finding("axes=1,3/no_keep_dims", 6, 9.296875, 9.3046875),
                op_finding("axes=all/keep_dims", 1, 11.0859375, 11.09375),
                op_finding("axes=all/no_keep_dims", 6, 9.296875, 9.3046875),
                op_finding("axes=1/no_keep_dims", 3, 9.984375, 9.9921875),
                op_finding("axes=0/no_keep_dims", 1, 11.0859375, 11.09375, predicted=False)]
    [cause] = root_causes(findings)
    assert cause.law is not None and cause.law.formula == "log(65504/n)"
    assert len(cause.findings) == 5
    brackets = cause.brackets()
    assert [(b.first.cliff.lo, len(b.findings)) for b in brackets if b.first.cliff] == [
        (9.296875, 2), (11.0859375, 2), (9.984375, 1)]
    lines = cause_lines(cause)
    assert lines[0] == ("[red]✗[/] reduce_log_sum_exp: mismatch:collapse in 5 failing cases — "
                        "theory log(65504/n): Σexp(x) over n equal values overflows fp16 "
                        "without the max-shift")
    cliffs = [line.strip() for line in lines if line.strip().startswith("cliff")]
    assert cliffs == [
        "cliff: x 9.296875 | 9.3046875 (output 11.0859 | 0 at op_out[0]), 17 predictions; "
        "theory log(65504/6) = 9.29811",
        "cliff: x 11.0859375 | 11.09375 (output 11.0859 | 0 at op_out[0]), 17 predictions; "
        "theory log(65504/1) = 11.0899",
        "cliff: x 9.984375 | 9.9921875 (output 11.0859 | 0 at op_out[0]), 17 predictions; "
        "theory log(65504/3) = 9.99125",
    ]
    assert "        axes=1,3/no_keep_dims: x[1, 6]: delta 9.30469" in lines


def test_signatures_and_laws_keep_causes_apart() -> None:
    findings = [op_finding("axes=1/no_keep_dims", 3, 9.984375, 9.9921875),
                op_finding("axes=all/keep_dims", 1, 11.0859375, 11.09375,
                           signature="mismatch:nonfinite")]
    assert [c.signature for c in root_causes(findings)] == [COLLAPSE, "mismatch:nonfinite"]
    sqrt = op_finding("axes=0/no_keep_dims", 4, 1.0, 1.0009765625)
    assert sqrt.cliff is not None
    sqrt.cliff.predicted = Boundary("sqrt(65504/4)", 128.0, "", "sqrt(65504/n)").to_dict()
    unknown = op_finding("axes=1/keep_dims", 2, 3.0, 3.001953125, predicted=False)
    causes = root_causes([*findings[:1], sqrt, unknown])
    # two laws for one signature: the unpredicted finding cannot say which it follows
    assert [None if c.law is None else c.law.formula for c in causes] == [
        "log(65504/n)", "sqrt(65504/n)", None]


def test_a_models_families_and_paths_are_one_finding_under_lints_boundary() -> None:
    lint = Boundary("log(65504/32)", math.log(65504 / 32), "reduce_log_sum_exp overflows")
    findings = [model_finding(path, family, lo, hi, lint if family == "const" else None)
                for path in ("export", "trace")
                for family, lo, hi in (("const", 7.62109375, 7.625),
                                       ("normal", -4.13671875, -4.1328125))]
    [cause] = root_causes(findings)
    assert cause.law == lint and len(cause.brackets()) == 2
    lines = [line.strip() for line in cause_lines(cause)]
    assert ("cliff in const: x 7.62109375 | 7.625 (output 11 | 0), 18 predictions; "
            "theory log(65504/32) = 7.62413") in lines
    assert "const(x=7.625) on trace, base inputs" in lines

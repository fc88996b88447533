"""Findings only far beyond the inputs a run starts from are margins, not failures."""

from __future__ import annotations

import math
from types import SimpleNamespace

from nebisect.detect.findings import Row
from nebisect.detect.matrix import RunReport
from nebisect.detect.realistic import REALISTIC_FACTOR, margin_line, realistic_limit
from nebisect.detect.summary import domain_lines
from nebisect.search.records import Culprit
from nebisect.search.space import Member
from nebisect.verdict import Verdict

#: the largest |value| of the example: a normal draw
SCALE = 3.6


def _row(signature: str, member: Member, op: str = "linear") -> Row:
    status = signature.partition(":")[0]
    return Row("sim:fp16", 0, Verdict(status, "predict", signature), "precision",
               input_set=member, culprit=Culprit(f"{op}_0", op, signature, "intermediates"),
               explored=True)


def _report(*failing: Row, undeclared: tuple[str, ...] = ("x",),
            declared_scale: float = 0.0) -> RunReport:
    example = Member("example", "example", None, SCALE)
    report = RunReport("model.mlpackage", "sim:fp64",
                       rows=[Row("sim:fp16", 0, Verdict("pass", "predict"), input_set=example),
                             *failing],
                       undeclared=list(undeclared), input_scale=SCALE,
                       declared_scale=declared_scale)
    report.regroup()
    return report


def _normal(scale: float) -> Member:
    return Member("normal", f"normal(scale={scale:g})", scale, scale)


def test_an_overflow_only_thousands_of_times_beyond_the_example_is_a_margin() -> None:
    report = _report(_row("mismatch:nonfinite", _normal(1.4e4)))
    assert report.findings == [] and not report.failed
    (far,) = report.far_findings
    assert (far.number, far.symptom, far.op_type) == (1, "nonfinite", "linear")
    assert margin_line(far, report.input_scale, report.undeclared) == (
        f"margin: {far.title} — only at inputs with |value| ≥ 1.4e+04, 3,889× the largest "
        "starting input (3.6); not a failure: declare a domain to judge it "
        "(--input-range x=LO:HI)")


def test_the_input_range_hints_quote_the_input_names_for_the_shell() -> None:
    name = "input ids; rm -rf ~"
    report = _report(_row("mismatch:nonfinite", _normal(1.4e4)), undeclared=(name, "mask"))
    (far,) = report.far_findings
    assert margin_line(far, report.input_scale, report.undeclared).endswith(
        "(--input-range 'input ids; rm -rf ~=LO:HI')")
    (line,) = domain_lines(SimpleNamespace(undeclared=[name, "mask"], findings=[far]))
    assert line.startswith("no input domain declared for 'input ids; rm -rf ~', mask: ")
    assert line.endswith("declare one with --input-range 'input ids; rm -rf ~=LO:HI' or "
                         "'input_domains' in the factory")


def test_a_cliff_within_the_factor_is_a_failure() -> None:
    report = _report(_row("mismatch:collapse", _normal(7.62), "reduce_log_sum_exp"))
    assert [f.op_type for f in report.findings] == ["reduce_log_sum_exp"]
    assert report.far_findings == [] and report.failed


def test_one_cause_with_a_realistic_trigger_stays_a_finding_whole() -> None:
    report = _report(_row("mismatch:nonfinite", _normal(9.0)),
                     _row("mismatch:nonfinite", _normal(3e4)))
    (finding,) = report.findings
    assert finding.smallest.magnitude == 9.0 and report.far_findings == []


def test_far_and_near_causes_are_numbered_apart() -> None:
    report = _report(_row("mismatch:nonfinite", _normal(2e4), "square"),
                     _row("mismatch:tolerance", _normal(4.0), "softmax"))
    assert [(f.number, f.op_type) for f in report.findings] == [(1, "softmax")]
    assert [(f.number, f.op_type) for f in report.far_findings] == [(1, "square")]
    assert report.failed


def test_what_stays_a_finding_at_any_input() -> None:
    crash = _row("crash:SIGSEGV", _normal(3e4))
    length = _row("mismatch:nonfinite", Member("lengths", "lengths(n=4096)", 4096, 4096.0))
    integer = _row("mismatch:integer", Member("bigints", "bigints(x=16777217)", None, 2**24 + 1))
    report = _report(crash, length, integer)
    assert sorted(f.symptom for f in report.findings) == ["crash", "integer", "nonfinite"]
    assert report.far_findings == []


def test_declared_domains_bound_exploration_so_nothing_is_far() -> None:
    far = _row("mismatch:nonfinite", _normal(1.4e4))
    assert [f.symptom for f in _report(far, undeclared=()).findings] == ["nonfinite"]
    assert realistic_limit(SCALE, [1000.0], ["y"]) == 1000.0
    assert realistic_limit(SCALE, [0.0], ["y"]) == REALISTIC_FACTOR * SCALE
    assert realistic_limit(SCALE, [255.0], []) == math.inf


def test_the_margin_round_trips_and_keeps_the_exit_code() -> None:
    report = _report(_row("mismatch:nonfinite", _normal(1.4e4)))
    again = RunReport.from_dict(report.to_dict())
    assert again.to_dict() == report.to_dict()
    assert [f.title for f in again.far_findings] == [report.far_findings[0].title]
    assert report.to_dict()["failed"] is False


def test_a_constant_fill_far_below_the_starting_inputs_is_a_margin() -> None:
    """ConvNeXt's LayerNorm over an image whose every pixel is ±6e-8 divides by its
    epsilon: a margin; all-zero inputs (silence) and a normal draw stay findings."""
    tiny = Member("tiny", "tiny(x=5.96e-08)", 5.96e-08, 5.96e-08)
    report = _report(_row("mismatch:tolerance", tiny, "layer_norm"))
    assert report.findings == [] and not report.failed
    (far,) = report.far_findings
    assert margin_line(far, report.input_scale, report.undeclared).endswith(
        "only at constant inputs of |value| ≤ 5.96e-08, 60,402,685× below the largest "
        "starting input (3.6); not a failure: declare a domain to judge it "
        "(--input-range x=LO:HI)")
    zeros = _row("mismatch:nonfinite", Member("zeros", "zeros(all)", None, 0.0), "rsqrt")
    small_normal = _row("mismatch:tolerance", _normal(1e-3), "softmax")
    assert len(_report(zeros, small_normal).findings) == 2
    assert _report(_row("mismatch:tolerance", tiny, "layer_norm"), undeclared=()).findings


def _reference_failure(member: Member) -> Row:
    verdict = Verdict("error", "reference", "error:reference:ZeroDivisionError")
    return Row("torch:cpu:fp64", 0, verdict, role="reference", input_set=member)


def test_the_reference_refusing_a_generated_input_is_a_note() -> None:
    """div_floor_int (apple/coremltools#2733): a divisor drawn as 0 at the generated
    ``static`` set made torch raise ZeroDivisionError — exit 1 on nebisect's own input,
    and no exploration to find the real integer bug."""
    example = Member("example", "example", None, 10.0)
    generated = _reference_failure(Member("length", "static", None, 0.0))
    judged = Row("sim:fp16", 0, Verdict("pass", "predict"), input_set=example)
    report = RunReport("m.py:model", "torch:cpu:fp64", rows=[judged, generated])
    assert report.reference_notes == [generated] and not report.failed
    # the user's own inputs refused: a failure still
    given = _reference_failure(Member("inputs", "inputs", None, 1.0))
    assert RunReport("m.py:model", "torch:cpu:fp64", rows=[judged, given]).failed
    # nothing judged anywhere: the failure stands, it is all the run has
    alone = RunReport("m.py:model", "torch:cpu:fp64", rows=[generated])
    assert alone.reference_notes == [] and alone.failed

"""One bug, one finding: failure groups merged by root cause, ordered, titled."""

from __future__ import annotations

import jsonschema
import pytest

from nebisect.detect.causes import RunFinding, root_causes, symptom_of
from nebisect.detect.findings import Row
from nebisect.detect.titles import title
from nebisect.report.schema import RUN_FINDINGS_SCHEMA
from nebisect.search.records import Culprit, FailureGroup
from nebisect.search.space import Member
from nebisect.verdict import Verdict

PATHS = ["export", "trace"]
TARGETS = ["sim:fp32", "sim:fp16", "sim:ane"]


def _member(x: float, family: str = "const") -> Member:
    return Member(family, f"{family}(x={x!r})", x, abs(x))


def _group(target: str, path: str, signature: str, attribution: str, op: str | None,
           x: float, message: str = "") -> FailureGroup:
    culprit = None if op is None else Culprit(f"{op}_0", op, signature, "intermediates")
    return FailureGroup(target, path, signature, attribution, culprit, _member(x), message,
                        [_member(x)])


def _rows(groups: list[FailureGroup]) -> list[Row]:
    """A passing row for every target and path, and the groups' failing ones."""
    rows = [Row(t, 0, Verdict("pass", "predict"), path=p) for t in TARGETS for p in PATHS]
    return rows + [Row(g.target, 0, Verdict("mismatch", "predict", g.signature), path=g.path,
                       input_set=g.smallest) for g in groups]


def _findings(groups: list[FailureGroup]) -> list[RunFinding]:
    return root_causes(groups, _rows(groups), lambda magnitude: 0.0,
                       lambda finding: title(finding, PATHS))


def test_one_bug_on_every_target_and_path_is_one_finding() -> None:
    groups = [_group(t, p, "mismatch:nonfinite", "precision", "log", 5.2 if t != "sim:fp32"
                     else 29.4) for t in TARGETS for p in PATHS]
    (finding,) = _findings(groups)
    assert (finding.number, finding.attribution, finding.op_type, finding.symptom) == (
        1, "precision", "log", "nonfinite")
    assert finding.shows["sim:fp16"] == {"export": "const(x=5.2)", "trace": "const(x=5.2)"}
    assert finding.title == (
        "precision: log returns inf/NaN in fp16 from const x ≈ 5.2 (sim:fp16, sim:ane; both "
        "paths); in fp32 from const x ≈ 29.4 (sim:fp32; both paths)")


def test_two_culprits_or_two_symptoms_stay_two_findings() -> None:
    groups = [_group("sim:ane", "export", "mismatch:nonfinite", "device", "softplus", 10.4),
              _group("sim:ane", "export", "mismatch:nonfinite", "device", "exp", 11.1),
              _group("sim:ane", "export", "crash:SIGSEGV", "device", "exp", 20.0)]
    findings = _findings(groups)
    assert [(f.symptom, f.op_type) for f in findings] == [
        ("crash", "exp"), ("nonfinite", "softplus"), ("nonfinite", "exp")]
    assert [f.number for f in findings] == [1, 2, 3]


def test_a_tolerance_miss_on_the_way_to_a_cliff_is_the_cliff() -> None:
    groups = [_group("sim:fp16", "export", "mismatch:nonfinite", "precision", "log", 5.2),
              _group("sim:fp16", "export", "mismatch:tolerance", "precision", "log", 5.1),
              _group("sim:fp32", "export", "mismatch:tolerance", "precision", None, 29.3),
              _group("sim:fp32", "export", "mismatch:nonfinite", "conversion", "log", 29.4)]
    (finding,) = _findings(groups)
    assert finding.attributions == ["precision", "conversion"]
    assert finding.title.endswith("also attributed conversion at larger inputs")


def test_a_cliff_is_titled_where_it_returns_inf_and_says_where_it_starts_drifting() -> None:
    """Wav2Vec2's GroupNorm at a waveform of std 192 gives wrong finite values; inf/NaN
    only from 400: the title says each where it is true."""
    groups = [_group("sim:fp16", "export", "mismatch:nonfinite", "precision", "square", 400.0),
              _group("sim:fp16", "export", "mismatch:tolerance", "precision", "square", 192.0)]
    (finding,) = _findings(groups)
    assert finding.smallest.magnitude == 192.0
    assert finding.title == (
        "precision: square returns inf/NaN in fp16 from const x ≈ 400 (sim:fp16; "
        "torch.export only); off beyond tolerance from const x ≈ 192")


def test_a_title_says_first_what_the_example_shows() -> None:
    """A converter that flips a padding mask: the example (padded) is off beyond
    tolerance, a mask with nothing padded returns NaN — the title leads with the example,
    and names the mask variant, not its inputs' scale (the example's own 3.41)."""
    example = Member("example", "example", None, 3.41)
    ones = Member("masks", "mask(ones)", None, 3.41)
    culprit = Culprit("masked_fill", "select", "mismatch:shape", "intermediates against torch")
    groups = [FailureGroup("sim:fp64", "export", "mismatch:tolerance", "conversion", culprit,
                           example, "", [example]),
              FailureGroup("sim:fp32", "export", "mismatch:tolerance", "conversion", culprit,
                           example, "", [example]),
              FailureGroup("sim:fp32", "export", "mismatch:nonfinite", "conversion", culprit,
                           ones, "", [ones])]
    (finding,) = _findings(groups)
    assert finding.symptom == "nonfinite"
    assert finding.title == (
        "conversion: select is off beyond tolerance at the example inputs (sim:fp64, "
        "sim:fp32; torch.export only); returns inf/NaN in fp32 at mask(ones) (sim:fp32; "
        "torch.export only)")
    # where the example shows the finding's own symptom, the title is as it was
    (alone,) = _findings(groups[2:])
    assert alone.title == ("conversion: select returns inf/NaN in fp32 at mask(ones) "
                           "(sim:fp32; torch.export only)")


def test_an_unnamed_tolerance_miss_far_from_any_cliff_stays_its_own_finding() -> None:
    groups = [_group("sim:fp16", "export", "mismatch:nonfinite", "precision", "log", 500.0),
              _group("sim:fp16", "export", "mismatch:tolerance", "precision", None, 1.0)]
    assert [f.op_type for f in _findings(groups)] == ["log", ""]


def test_errors_differ_by_message_and_stage_not_by_the_shapes_they_name() -> None:
    groups = [
        _group("sim:ane", "export", "error:predict:shape [?, 768]", "device", None, 2,
               "Data-dependent shapes were disabled"),
        _group("sim:ane", "trace", "error:predict:shape [N, ?, N]", "device", None, 2,
               "Data-dependent shapes were disabled"),
        _group("sim:fp32", "trace", "error:convert:unsupported lgamma", "conversion", None, 0,
               "unsupported lgamma"),
    ]
    findings = _findings(groups)
    assert len(findings) == 2
    assert findings[0].title == ("device: the model fails at predict: Data-dependent shapes "
                                 "were disabled (sim:ane; both paths)")
    assert findings[1].title == ("conversion: conversion fails on jit.trace only: unsupported "
                                 "lgamma (sim:fp32)")


@pytest.mark.parametrize(("signature", "symptom"), [
    ("crash:SIGSEGV", "crash"), ("timeout", "timeout"), ("oom", "oom"),
    ("error:load:bad", "error"), ("mismatch:nan-suppressed", "nonfinite"),
    ("mismatch:collapse", "collapse"), ("mismatch:integer", "integer"),
    ("unrouted:softmax", "unrouted"),
])
def test_symptom_classes(signature: str, symptom: str) -> None:
    assert symptom_of(signature) == symptom


def test_findings_round_trip_and_match_their_schema() -> None:
    groups = [_group(t, "export", "mismatch:collapse", "device", "reduce_log_sum_exp", 7.625)
              for t in TARGETS]
    findings = _findings(groups)
    documents = [f.to_dict() for f in findings]
    jsonschema.validate(documents, RUN_FINDINGS_SCHEMA)
    assert [RunFinding.from_dict(d).to_dict() for d in documents] == documents
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([{**documents[0], "symptom": "odd"}], RUN_FINDINGS_SCHEMA)

"""Verdicts: statuses, stages, signatures, the typed parts and their JSON round trip."""

from __future__ import annotations

import json

import pytest

from nebisect.case import SourceRef
from nebisect.verdict import (
    CASE_STAGES,
    Stage,
    Status,
    Verdict,
    error_signature,
    normalize_message,
)


def test_error_signature_is_stable_across_runs() -> None:
    a = "Invalid blob shape: Data-dependent shapes were disabled: var_39 - [?, 768]\nstack..."
    b = "Invalid blob shape: Data-dependent shapes were disabled: var_1204 - [?, 768]"
    assert error_signature("predict", a) == error_signature("predict", b)
    assert "Data-dependent shapes were disabled" in normalize_message(a)
    assert normalize_message("at 0x7ffde3 in /tmp/abc/x.py") == "at 0x? in <path>"


def test_unknown_status_rejected() -> None:
    with pytest.raises(ValueError):
        Verdict("weird")


def test_statuses_and_stages_are_enums_that_read_and_write_as_strings() -> None:
    verdict = Verdict("error", "reference", "error:reference:boom")
    assert verdict.status is Status.ERROR and verdict.stage == Stage.REFERENCE == "reference"
    body = json.loads(verdict.to_json())
    assert (body["status"], body["stage"]) == ("error", "reference")
    again = Verdict.from_json(verdict.to_json())
    assert again == verdict and again.status is Status.ERROR and again.failed
    assert json.dumps({Status.PASS: [Stage.LOAD]}) == '{"pass": ["load"]}'


def test_stage_names_have_one_definition() -> None:
    """A case's stages, the stages a timeout names and the stages a reduction keeps
    all come from :class:`Stage` (there used to be three separate tuples)."""
    from nebisect.case import Case
    from nebisect.isolation.timeouts import TIMEOUT_STAGES
    from nebisect.minimize.options import REDUCIBLE_STAGES

    assert CASE_STAGES == (Stage.CONVERT, Stage.LOAD, Stage.PREDICT)
    assert set(TIMEOUT_STAGES) == set(CASE_STAGES) and set(REDUCIBLE_STAGES) < set(CASE_STAGES)
    assert all(isinstance(s, Stage) for s in (*TIMEOUT_STAGES, *REDUCIBLE_STAGES))
    case = Case.from_dict(json.loads(json.dumps(Case(SourceRef("mlpackage", "m"), "sim:fp16",
                                                     stage="load").to_dict())))
    assert case.stage is Stage.LOAD


def test_typed_parts_read_and_write_the_flat_metrics_object() -> None:
    """A verdict's JSON keeps every part's facts flat under ``metrics``: the child's in
    key order, then the process facts isolation adds, in the order it adds them."""
    metrics = {"attempts": [{"path": "export", "status": "ok"}], "comparisons": [],
               "masked": {"y": 2},
               "max_abs_error": 1.0, "max_ulp_error": 2.0, "min_cosine": 1.0,
               "op_types": {"add": 1}, "out_of_range": 0, "path": "export",
               "paths": ["export"], "precision": "fp16", "record": {"a": 1},
               "routed": "1/1 compute ops on ne", "setup": [],
               "exit_code": 0, "worker_case": 2, "stderr_bytes": 0, "reconfirmed": False,
               "template": "warm", "worker_attempts": []}
    verdict = Verdict.from_dict({"status": "pass", "metrics": metrics})
    assert verdict.error_metrics is not None and verdict.error_metrics.max_ulp_error == 2.0
    assert (verdict.target_facts.masked, verdict.target_facts.routed) == (
        {"y": 2}, "1/1 compute ops on ne")
    assert verdict.conversion is not None and verdict.conversion.paths == ["export"]
    assert (verdict.process.exit_code, verdict.process.worker_attempts) == (0, [])
    assert verdict.job_result == {"record": {"a": 1}}
    written = verdict.to_dict()["metrics"]
    assert list(written) == list(metrics) and written == metrics
    assert Verdict("crash").to_dict()["metrics"] == {}

"""Past the first wall (issue 44): a conversion failure nebisect's converter overrides
cure does not end ``run``.

tests/support/needs_overrides.py fails to convert at coremltools' defaults on
torch.export (``new_ones``). By default ``run`` keeps that failure as its one
``conversion`` finding and judges the program converted with the overrides on every
target, each such row saying so; ``--strict-conversion`` (``strict_conversion=`` in the
Python API) stops at the failure; ``--converter-overrides`` converts with them from the
start, and there is nothing to report.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from support import REPO, SUPPORT

import nebisect
from nebisect.detect.causes import RunFinding
from nebisect.detect.findings import Row
from nebisect.detect.titles import title
from nebisect.detect.triggers import trigger_of
from nebisect.fixes.converter_compat import ConverterCompat
from nebisect.inputs.families import Member
from nebisect.search.records import FailureGroup
from nebisect.sources.convert import OVERRIDES_NOTE
from nebisect.verdict import Status, Verdict

SOURCE = f"{SUPPORT}/needs_overrides.py:model"
SMALL = ["-t", "sim:fp32", "--explore", "none", "--convert", "export"]
DEFAULTS = ("conversion: conversion fails at coremltools' defaults: torch.export: "
            "NotImplementedError: Unsupported fx node new_ones, kind new_ones; judged as "
            "converted with nebisect's converter overrides (sim:fp64, sim:fp32)")
#: seed 003's pool: torch.export converts at the defaults, jit.trace only with the
#: overrides (NumPy ≥ 2.4's aten::Int)
MEANPOOL = f"{REPO}/examples/meanpool.py:model"


def _run(*extra: str, source: str = SOURCE, small: tuple[str, ...] = (*SMALL,)
         ) -> tuple[int, dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "nebisect", "run", source, *small, "--json",
                           *extra], capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def _judged(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows whose program was judged (a prediction made and compared)."""
    return [r for r in report["rows"] if r["verdict"]["status"] in ("pass", "mismatch")]


def test_by_default_the_failure_is_a_finding_and_the_overridden_program_is_judged() -> None:
    code, report = _run()
    assert code == 1 and report["failed"]
    [finding] = report["findings"]
    assert finding["attribution"] == "conversion" and finding["stage"] == "convert"
    assert finding["title"] == DEFAULTS
    # no path converted at the defaults: the failure is the whole conversion's, with the
    # signature --strict-conversion gives (bisected as such, without the overrides)
    assert finding["paths"] == [""] and finding["targets"] == ["sim:fp64", "sim:fp32"]
    assert finding["groups"][0]["signature"] == (
        "error:convert:torch.export: NotImplementedError: Unsupported fx node new_ones, kind "
        "new_ones")
    failed = [r for r in report["rows"] if r["verdict"]["status"] == "error"]
    assert [(r["target"], r["path"], r["attribution"], r["verdict"]["stage"])
            for r in failed] == [("sim:fp64", "", "conversion", "convert"),
                                 ("sim:fp32", "", "conversion", "convert")]
    judged = _judged(report)
    assert [(r["target"], r["path"]) for r in judged] == [("sim:fp64", "export"),
                                                          ("sim:fp32", "export")]
    for row in judged:
        assert row["verdict"]["status"] == "pass", row["verdict"]["message"]
        assert row["verdict"]["metrics"]["notes"] == [OVERRIDES_NOTE]
    [attempt] = report["conversions"]["fp32"]["metrics"]["attempts"]
    assert attempt["status"] == "ok" and attempt["note"] == OVERRIDES_NOTE
    assert attempt["cured"] == "NotImplementedError: Unsupported fx node new_ones, kind new_ones"


def test_a_path_cured_beside_one_converting_at_the_defaults_is_a_finding_of_that_path(
) -> None:
    code, report = _run(source=MEANPOOL, small=("-t", "sim:fp32", "--explore", "none",
                                                "--lengths", "2"))
    assert code == 1
    [finding] = report["findings"]
    assert finding["title"] == (
        "conversion: conversion fails at coremltools' defaults on jit.trace: TypeError: only "
        "0-dimensional arrays can be converted to Python scalars; judged as converted with "
        "nebisect's converter overrides (sim:fp64, sim:fp32)")
    assert finding["paths"] == ["trace"]
    assert finding["shows"]["sim:fp32"] == {"export": "pass", "trace": "length(2)"}
    judged = {(r["target"], r["path"]): r["verdict"] for r in _judged(report)}
    assert set(judged) == {(t, p) for t in ("sim:fp64", "sim:fp32") for p in ("export", "trace")}
    for (_, path), verdict in judged.items():
        assert verdict["status"] == "pass"
        assert (OVERRIDES_NOTE in verdict["metrics"].get("notes", [])) is (path == "trace")


def test_strict_conversion_stops_at_the_failure() -> None:
    """Through the Python API, whose options mirror the CLI's."""
    result = nebisect.run(SOURCE, target="sim:fp32", explore="none", convert="export",
                          strict_conversion=True, progress=False)
    assert not result.ok
    [finding] = result.findings
    assert finding.attribution == "conversion" and finding.stage == "convert"
    assert finding.title == ("conversion: conversion fails: torch.export: NotImplementedError: "
                             "Unsupported fx node new_ones, kind new_ones (sim:fp64, sim:fp32)")
    report = json.loads(result.to_json())
    assert _judged(report) == []
    assert {r["verdict"]["stage"] for r in report["rows"]} == {"convert"}


def test_with_the_overrides_from_the_start_there_is_no_conversion_finding() -> None:
    code, report = _run("--converter-overrides")
    assert code == 0 and report["findings"] == []
    judged = _judged(report)
    assert len(judged) == len(report["rows"]) == 2
    assert all(OVERRIDES_NOTE not in r["verdict"]["metrics"].get("notes", []) for r in judged)


def _finding(signature: str, path: str, message: str = "", op: str = "",
             attribution: str = "precision") -> RunFinding:
    member = Member("length", "static")
    group = FailureGroup("sim:fp16", path, signature, attribution, None, member, message,
                         [member])
    symptom = signature.partition(":")[0] if signature.startswith("error") else (
        signature.partition(":")[2])
    return RunFinding(1, op, symptom, [group])


@pytest.mark.parametrize("cured", [(), ("export",)])
def test_a_finding_on_an_overridden_program_says_so(cured: tuple[str, ...]) -> None:
    finding = _finding("mismatch:tolerance", "export", op="softmax")
    said = title(finding, ["export"], cured)
    assert said.startswith("precision: softmax is off beyond tolerance")
    assert said.endswith(f"; torch.export {OVERRIDES_NOTE}") is bool(cured)


@pytest.mark.parametrize("judged", ["", "jit.trace "])
def test_a_cured_failure_keeps_its_last_clause_however_long_its_message(judged: str) -> None:
    message = ("conversion fails at coremltools' defaults on torch.export: NotImplementedError: "
               + "x" * 300 + f"; {judged}judged as converted with nebisect's converter overrides")
    finding = _finding("error:convert:…", "export", message, attribution="conversion")
    said = title(finding, ["export"], ["export"])
    assert said.endswith(f"…; {judged}judged as converted with nebisect's converter overrides "
                         "(sim:fp16)")
    assert OVERRIDES_NOTE not in said


def test_a_trigger_on_an_overridden_program_is_bisected_with_the_overrides() -> None:
    """Its program converts only with them; the failure at the defaults is bisected
    without them (that is what fails)."""
    static = Member("length", "static")
    judged = FailureGroup("sim:fp16", "export", "mismatch:tolerance", "precision", None,
                          static, "", [static])
    defaults = FailureGroup("sim:fp16", "export", "error:convert:x", "conversion", None,
                            static, "", [static])
    rows = [Row("sim:fp16", 0, Verdict(Status.MISMATCH, "predict", "mismatch:tolerance"),
                "precision", path="export"),
            Row("sim:fp16", 0, Verdict(Status.ERROR, "convert", "error:convert:x"),
                "conversion", path="export")]
    assert trigger_of(1, judged, rows, cured=["export"]).fixes == [ConverterCompat.name]
    assert trigger_of(1, judged, rows).fixes == []
    assert trigger_of(2, defaults, rows, cured=["export"]).fixes == []

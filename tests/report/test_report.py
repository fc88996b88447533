"""report.json (schema, strict JSON, round trip) and report.html (self-contained)."""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from html.parser import HTMLParser
from types import SimpleNamespace

import pytest
import support.report_payloads as rp

from nebisect.detect.report import run_payload, write_run_report
from nebisect.errors import NebisectError
from nebisect.report import (
    REPORT_SCHEMA,
    CliffSweep,
    Divergence,
    MatrixCell,
    NamedVerdict,
    OpError,
    ReportPayload,
    RunMatrix,
    Table,
    read_report,
    to_jsonable,
    write_report,
)
from nebisect.verdict import ErrorMetrics, Timings, Verdict


@pytest.fixture(scope="module")
def full_payload() -> ReportPayload:
    fuzz = rp.fuzz_payload()
    fuzz.divergences = [rp.bisect_divergence()]
    fuzz.matrices = [rp.run_matrix()]
    fuzz.title = "everything <at once> & more"
    return fuzz


def strict_json(text: str):
    def reject(constant: str):
        raise AssertionError(f"non-strict JSON constant {constant}")

    return json.loads(text, parse_constant=reject)


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.tags: set[str] = set()
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        for key, value in attrs:
            if key == "id":
                self.ids.append(value)
            if key in ("src", "href", "xlink:href") and value and not value.startswith("#"):
                self.urls.append(value)


def test_report_json_is_strict_versioned_and_validates(tmp_path, full_payload):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the dev extra")
    files = write_report(tmp_path / "r", "fuzz", full_payload,
                         created=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    document = strict_json(files.json.read_text())
    jsonschema.validate(document, REPORT_SCHEMA)
    assert (document["schema"], document["schema_version"], document["kind"]) == (
        "nebisect.report", 1, "fuzz")
    assert document["created"] == "2026-01-02T03:04:05+00:00"
    sweep = document["sweeps"][0]
    assert sweep["bracket"] == [7.62109375, 7.625]
    assert sweep["predicted_label"] == "log(65504/32)"
    assert document["verdicts"][0]["verdict"]["signature"] == "mismatch:collapse"


def test_schema_rejects_a_bad_report():
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the dev extra")
    document = {"schema": "nebisect.report", "schema_version": 1, "kind": "fuzz"}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, REPORT_SCHEMA)


def test_round_trip_keeps_every_record(tmp_path, full_payload):
    files = write_report(tmp_path, "fuzz", full_payload)
    kind, payload = read_report(files.json)
    assert kind == "fuzz"
    assert payload.to_dict() == full_payload.to_dict()
    assert payload.sweeps[0].x == full_payload.sweeps[0].x
    assert isinstance(payload.verdicts[0].verdict, Verdict)
    assert payload.divergences[0].first_divergent == "lse"


def test_nonfinite_numbers_survive_as_strings(tmp_path):
    sweep = CliffSweep("s", [0.0, 1.0, 2.0], [1.0, math.inf, math.nan], [1.0, 2.0, -math.inf])
    divergence = Divergence("d", [OpError(0, "a", "exp", math.inf, False)])
    files = write_report(tmp_path, "bisect", ReportPayload("t", sweeps=[sweep],
                                                           divergences=[divergence]))
    document = strict_json(files.json.read_text())
    assert document["sweeps"][0]["output"] == [1.0, "Infinity", "NaN"]
    assert document["sweeps"][0]["reference"][2] == "-Infinity"
    _, payload = read_report(files.json)
    assert math.isnan(payload.sweeps[0].output[2]) and payload.sweeps[0].output[1] == math.inf
    assert payload.divergences[0].ops[0].error == math.inf
    assert '<td class="num">inf</td>' in files.html.read_text()


def test_html_is_self_contained_with_unique_ids(tmp_path, full_payload):
    files = write_report(tmp_path, "fuzz", full_payload)
    html = files.html.read_text()
    parser = _Ids()
    parser.feed(html)
    assert parser.urls == []
    assert not {"script", "link", "img", "iframe"} & parser.tags
    assert "<style>" in html and "@import" not in html
    assert {"cliff-sweep-0", "divergence-0", "run-matrix-0", "verdicts"} <= set(parser.ids)
    duplicates = {i for i in parser.ids if parser.ids.count(i) > 1}
    assert duplicates == set()
    assert html.count("<svg") == 3
    assert "everything &lt;at once&gt; &amp; more" in html
    assert "cliff between adjacent fp16 values 7.621094 | 7.625" in html
    assert "first divergent op: lse" in html


def test_sections_without_data_are_left_out(tmp_path):
    files = write_report(tmp_path, "replay", ReportPayload("only a title"))
    html = files.html.read_text()
    assert "<svg" not in html and 'id="verdicts"' not in html
    assert "<h1>only a title</h1>" in html


def test_unknown_kind_and_file_in_the_way_are_user_errors(tmp_path):
    with pytest.raises(NebisectError, match="unknown report kind 'sweep'"):
        write_report(tmp_path, "sweep", ReportPayload("t"))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(NebisectError, match="not a directory"):
        write_report(blocker, "run", ReportPayload("t"))


def test_read_report_rejects_foreign_and_future_files(tmp_path):
    other = tmp_path / "other.json"
    other.write_text('{"schema": "something"}')
    with pytest.raises(NebisectError, match="not a nebisect report"):
        read_report(other)
    future = tmp_path / "future.json"
    future.write_text('{"schema": "nebisect.report", "schema_version": 99}')
    with pytest.raises(NebisectError, match="schema version 99"):
        read_report(future)


def test_run_matrix_from_verdicts():
    matrix = rp.run_matrix()
    assert matrix.rows == ["sim:fp32", "sim:fp16", "sim:ane"]
    assert matrix.columns == ["2", "8", "37"]
    cell = matrix.cell("sim:ane", "8")
    assert cell == MatrixCell("sim:ane", "8", "error", "error", cell.detail)
    assert "Data-dependent shapes" in cell.detail
    mismatch = RunMatrix.from_verdicts("m", [("t", "1", Verdict("mismatch", signature=
                                                                 "mismatch:collapse"))])
    assert mismatch.cells[0].text == "collapse"


def test_run_report_adapter(tmp_path):
    failing = Verdict("mismatch", signature="mismatch:collapse", message="collapse at 1/16",
                      error_metrics=ErrorMetrics(max_ulp_error=1024.0, max_abs_error=11.1,
                                                  min_cosine=0.0),
                      placement={"lse": "ne", "conv": "ne", "head": "cpu"},
                      timings=Timings(predict=0.25))
    result = SimpleNamespace(
        source="seed000.mlpackage", reference="sim:fp64",
        rows=[SimpleNamespace(target="sim:fp16", length=1, verdict=Verdict("pass"),
                              attribution=""),
              SimpleNamespace(target="sim:ane", length=1, verdict=failing,
                              attribution="device")],
        conversions={},
    )
    payload = run_payload(result)
    assert payload.summary["result"] == "failures found"
    assert payload.matrices[0].cell("sim:ane", "1").detail == "[device] collapse at 1/16"
    assert payload.tables[0].rows[1][:5] == ["sim:ane", 1, "mismatch", "mismatch:collapse",
                                             "device"]
    assert payload.tables[0].rows[1][8] == "ne 2 · cpu 1"
    files = write_run_report(tmp_path, result)
    assert 'id="run-matrix-0"' in files.html.read_text()


def test_a_failure_found_by_exploration_is_a_failure_of_the_report(tmp_path):
    """The matrix shows only the base input sets; the summary (and with it report.json
    and report.html) must still say what the exit code says."""
    collapse = Verdict("mismatch", signature="mismatch:collapse", message="collapse")
    result = SimpleNamespace(
        source="seed000.mlpackage", reference="sim:fp64",
        rows=[SimpleNamespace(target="sim:ane", length=0, verdict=Verdict("pass"),
                              attribution="", explored=False),
              SimpleNamespace(target="sim:ane", length=0, verdict=collapse,
                              attribution="device", explored=True)],
        conversions={}, groups=[SimpleNamespace(cliffs=[], culprit=None)],
    )
    payload = run_payload(result)
    assert payload.summary["result"] == "failures found"
    assert payload.summary["failure groups"] == 1
    assert payload.summary["explored predictions"] == 1
    files = write_run_report(tmp_path, result)
    assert "all pass" not in files.html.read_text()
    assert json.loads(files.json.read_text())["summary"]["result"] == "failures found"


def test_to_jsonable():
    import numpy as np

    value = {"a": np.float32(1.5), "b": [math.nan, np.int64(3)], 4: (True, None),
             "c": np.arange(2), "d": object}
    assert to_jsonable(value) == {"a": 1.5, "b": ["NaN", 3], "4": [True, None], "c": [0, 1],
                                  "d": "<class 'object'>"}


def test_payload_records_validate_their_shape():
    with pytest.raises(ValueError, match="as many outputs"):
        CliffSweep("s", [0.0, 1.0], [1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="two x values"):
        CliffSweep("s", [0.0], [1.0], [1.0], bracket=[1.0])
    named = NamedVerdict("n", Verdict("pass"))
    assert ReportPayload("t", verdicts=[named]).junit_results() == [("n", named.verdict)]
    assert Table.from_dict(Table("t", ["a"], [[1]]).to_dict()) == Table("t", ["a"], [[1]])


def test_plots_are_deterministic(full_payload):
    from nebisect.report.plots import cliff_sweep_svg

    sweep = full_payload.sweeps[0]
    first, second = cliff_sweep_svg(sweep, "x-0"), cliff_sweep_svg(sweep, "x-0")
    assert first == second
    assert re.match(r'<svg id="x-0-svg" class="plot-svg"', first)

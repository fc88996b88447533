"""Reports: report.json + a self-contained report.html, JUnit XML, SARIF.

API for commands (run, bisect, fuzz, replay; ``--report DIR`` / ``--junit FILE``)::

    from nebisect.report import (
        ReportPayload, NamedVerdict, Table, CliffSweep, Divergence, OpError, RunMatrix,
        MatrixCell, write_report, write_junit,
    )

    payload = ReportPayload(
        title="nebisect run model.mlpackage",
        summary={"source": "model.mlpackage", "targets": ["sim:fp16", "sim:ane"]},
        verdicts=[NamedVerdict("sim:ane/L=8", verdict, group="sim:ane")],
        matrices=[RunMatrix.from_verdicts("targets × lengths",
                                          [("sim:ane", "8", verdict), ...])],
        sweeps=[CliffSweep("reduce_log_sum_exp, C=32", x, output, reference,
                           target="sim:ane", bracket=[7.62109375, 7.625],
                           bracket_outputs=[11.09, 0.0],
                           predicted_boundary=7.6241, predicted_label="log(65504/32)",
                           predictions=17)],
        divergences=[Divergence("first divergence", [OpError(0, "conv_0", "conv", 0.5, True),
                                                     ...], first_divergent="lse_0",
                                target="sim:ane", unit="ULP", threshold=16)],
        tables=[Table("findings", ["op", "signature"], [["lse", "mismatch:collapse"]])],
    )
    files = write_report(report_dir, "run", payload)   # kinds: run|bisect|fuzz|replay|lint
    files.json, files.html                              # paths written
    write_junit(path, "nebisect.replay", payload.junit_results())   # or any (name, Verdict) list

    read_report(files.json) -> (kind, ReportPayload)    # the inverse of write_report's json

* ``write_report(report_dir, kind, payload)`` creates ``report_dir`` and writes
  ``report.json`` (strict JSON, versioned schema documented in
  :mod:`nebisect.report.schema`, ``REPORT_SCHEMA`` is its JSON Schema) and
  ``report.html`` (inline CSS, plots as inline SVG rendered by matplotlib; opens
  offline). Both writes are atomic. Sections with no data are left out.
* ``write_junit(path, suite, results)`` / ``junit_xml(suite, results)``: one test case
  per (name, Verdict); mismatch/unrouted → failure, crash/error/timeout/oom → error,
  skipped → skipped (see :mod:`nebisect.report.junit`).
* ``write_sarif(path, lint_result)`` / ``sarif_log(lint_result)``: SARIF 2.1.0 of a
  ``nebisect lint`` run (:mod:`nebisect.report.sarif`).

Floats in payloads may be NaN/±inf; JSON carries them as "NaN"/"Infinity"/"-Infinity".
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from nebisect.files import write_text
from nebisect.report.html import render_html
from nebisect.report.json import dumps, read_report, report_document
from nebisect.report.junit import junit_xml, write_junit
from nebisect.report.outputs import output_directory
from nebisect.report.payload import (
    REPORT_KINDS,
    CliffSweep,
    Divergence,
    MatrixCell,
    NamedVerdict,
    ReportPayload,
    RunMatrix,
    Table,
    to_jsonable,
)
from nebisect.report.sarif import sarif_log, write_sarif
from nebisect.report.schema import REPORT_SCHEMA, REPORT_SCHEMA_VERSION
from nebisect.search.divergence import OpError

__all__ = [
    "REPORT_FILE_NAMES", "REPORT_KINDS", "REPORT_SCHEMA", "REPORT_SCHEMA_VERSION", "CliffSweep",
    "Divergence", "MatrixCell",
    "NamedVerdict", "OpError", "ReportFiles", "ReportPayload", "RunMatrix", "Table",
    "junit_xml", "read_report", "sarif_log", "to_jsonable", "write_junit",
    "write_report", "write_sarif",
]


#: the files :func:`write_report` writes into a ``--report`` directory: json, then html
REPORT_FILE_NAMES = ("report.json", "report.html")


@dataclass(frozen=True)
class ReportFiles:
    json: Path
    html: Path


def write_report(
    report_dir: str | os.PathLike[str],
    kind: str,
    payload: ReportPayload,
    *,
    created: datetime | None = None,
) -> ReportFiles:
    """Write ``report.json`` and ``report.html`` for ``payload`` into ``report_dir``."""
    directory = output_directory(report_dir, "--report")
    document = report_document(kind, payload, created)
    json_name, html_name = REPORT_FILE_NAMES
    json_path = write_text(directory / json_name, dumps(document))
    html_path = write_text(directory / html_name, render_html(document, payload))
    return ReportFiles(json_path, html_path)


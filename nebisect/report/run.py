"""The report of ``nebisect run --report DIR``: the target × length matrix and its rows.

Duck-typed over :class:`nebisect.matrix.RunReport` (``source``, ``reference``,
``rows`` of target/length/verdict/attribution, ``conversions`` by precision) so this
module needs nothing of the runner at import time.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

from nebisect.report.payload import NamedVerdict, ReportPayload, RunMatrix, Table
from nebisect.verdict import placement_summary

ROW_COLUMNS = ["target", "length", "status", "signature", "attribution", "max ULP", "max abs",
               "cosine", "placement", "time s"]


def run_payload(result: Any) -> ReportPayload:
    """The :class:`ReportPayload` of one ``nebisect run``."""
    rows = list(result.rows)
    matrix = RunMatrix.from_verdicts(
        "verdict per target × length",
        [(row.target, str(row.length), row.verdict) for row in rows],
    )
    for cell, row in zip(matrix.cells, rows, strict=True):
        if row.attribution:
            cell.detail = f"[{row.attribution}] {cell.detail}".strip()
    table_rows = []
    for row in rows:
        v = row.verdict
        table_rows.append([
            row.target, row.length, v.status, v.signature, row.attribution,
            v.metrics.get("max_ulp_error"), v.metrics.get("max_abs_error"),
            v.metrics.get("min_cosine"), placement_summary(v.placement),
            round(sum(t for t in v.timings.values() if isinstance(t, (int, float))), 3),
        ])
    conversions = [
        [precision, v.status, v.signature, v.message]
        for precision, v in sorted(result.conversions.items())
    ]
    statuses = Counter(row.verdict.status for row in rows)
    return ReportPayload(
        title=f"nebisect run {result.source}",
        summary={
            "source": result.source,
            "reference": result.reference,
            "targets": list(dict.fromkeys(row.target for row in rows)),
            "lengths": list(dict.fromkeys(row.length for row in rows)),
            "verdicts": dict(sorted(statuses.items())),
            "result": "failures found" if any(r.verdict.failed for r in rows) else "all pass",
        },
        verdicts=[NamedVerdict(f"{row.target} L={row.length}", row.verdict, group=row.target)
                  for row in rows],
        matrices=[matrix],
        tables=[Table("rows", ROW_COLUMNS, table_rows)]
        + ([Table("conversions", ["precision", "status", "signature", "message"],
                  conversions)] if conversions else []),
    )


def write_run_report(report_dir: str | os.PathLike[str], result: Any) -> Any:
    """Write report.json/report.html of a run into ``report_dir`` (``--report``)."""
    from nebisect.report import write_report

    return write_report(report_dir, "run", run_payload(result))

"""The report of ``nebisect run --report DIR``: the target × input set matrix and its rows.

Duck-typed over :class:`nebisect.detect.matrix.RunReport` (``source``, ``reference``,
``rows`` of target/length/verdict/attribution, ``conversions`` by precision) so this
module needs nothing of the runner at import time. A row may also carry its conversion
``path`` (shown beside the target), its ``input_set`` (the matrix's column, else the
length) and ``explored``: the exploration's rows stay in ``--json``, not in this matrix.
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
    rows = [row for row in result.rows if not getattr(row, "explored", False)]
    matrix = RunMatrix.from_verdicts(
        "verdict per target × input set",
        [(_where(row), _column(row), row.verdict) for row in rows],
    )
    for cell, row in zip(matrix.cells, rows, strict=True):
        if row.attribution:
            cell.detail = f"[{row.attribution}] {cell.detail}".strip()
    table_rows = []
    for row in rows:
        v, measured = row.verdict, row.verdict.error_metrics
        table_rows.append([
            row.target, row.length, v.status, v.signature, row.attribution,
            *((measured.max_ulp_error, measured.max_abs_error, measured.min_cosine) if measured
              else (None, None, None)),
            placement_summary(v.placement),
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
        verdicts=[NamedVerdict(f"{_where(row)} {_column(row)}", row.verdict, group=row.target)
                  for row in rows],
        matrices=[matrix],
        tables=[Table("rows", ROW_COLUMNS, table_rows)]
        + ([Table("conversions", ["precision", "status", "signature", "message"],
                  conversions)] if conversions else []),
    )


def _where(row: Any) -> str:
    """The target, with its conversion path when it has one."""
    path = getattr(row, "path", "")
    return f"{row.target} [{path}]" if path else str(row.target)


def _column(row: Any) -> str:
    input_set = getattr(row, "input_set", None)
    return str(input_set.label) if input_set is not None else str(row.length)


def write_run_report(report_dir: str | os.PathLike[str], result: Any) -> Any:
    """Write report.json/report.html of a run into ``report_dir`` (``--report``)."""
    from nebisect.report import write_report

    return write_report(report_dir, "run", run_payload(result))

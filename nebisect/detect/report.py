"""The report of ``nebisect run --report DIR``: the target × input set matrix and its rows.

Duck-typed over :class:`nebisect.detect.matrix.RunReport` (``source``, ``reference``,
``rows`` of target/length/verdict/attribution, ``conversions`` by precision) so this
module needs nothing of the runner at import time. A row may also carry its conversion
``path`` (shown beside the target), its ``input_set`` (the matrix's column, else the
length) and ``explored``: the exploration's rows stay in ``--json``, not in this matrix.
The failure groups' triggers (:mod:`nebisect.detect.triggers`), saved beside the report,
are named in its summary and listed with their next commands.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nebisect.detect.issue import environment, issue_finding, target_words
from nebisect.detect.triggers import INDEX, REPORT_DIRECTORY, REPORT_KEY, TriggerIndex
from nebisect.report.payload import (
    CliffSweep,
    Divergence,
    NamedVerdict,
    ReportFinding,
    ReportPayload,
    RunMatrix,
    Table,
)
from nebisect.search.plan import BudgetNote
from nebisect.search.readout import Element
from nebisect.sources.convert import OVERRIDES_NOTE, is_cured_failure
from nebisect.verdict import placement_summary

if TYPE_CHECKING:
    from nebisect.detect.causes import RunFinding

ROW_COLUMNS = ["target", "length", "status", "signature", "attribution", "max ULP", "max abs",
               "cosine", "placement", "time s"]
FINDING_COLUMNS = ["#", "target", "path", "signature", "attribution", "culprit", "trigger",
                   "inputs", "next command"]


def run_payload(result: Any, triggers: TriggerIndex | None = None) -> ReportPayload:
    """The :class:`ReportPayload` of one ``nebisect run``; with the ``triggers`` saved in
    the report's :data:`~nebisect.detect.triggers.REPORT_DIRECTORY`, the summary names
    their index and a table lists each finding's trigger and next command."""
    rows = [row for row in result.rows if not getattr(row, "explored", False)]
    compressed = getattr(result, "compressed", None)
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
            round(v.timings.seconds, 3),
        ])
    conversions = [
        [precision, v.status, v.signature, v.message]
        for precision, v in sorted(result.conversions.items())
    ]
    statuses = Counter(row.verdict.status for row in rows)
    return ReportPayload(
        title=f"nebisect run {result.source}" + (f", {compressed.words}" if compressed else ""),
        summary={
            "source": result.source,
            **({"compressed": compressed.words} if compressed else {}),
            "reference": result.reference,
            "targets": list(dict.fromkeys(row.target for row in rows)),
            "lengths": list(dict.fromkeys(row.length for row in rows)),
            "verdicts": dict(sorted(statuses.items())),
            # Every row counts, the exploration's too: the same rule as the exit code.
            "result": "failures found" if any(r.verdict.failed for r in result.rows)
            else "all pass",
            "findings": len(getattr(result, "findings", ())),
            **({"margins": len(result.far_findings)} if getattr(result, "far_findings", ())
               else {}),
            "failure groups": len(getattr(result, "groups", ())),
            "explored predictions": sum(bool(getattr(r, "explored", False))
                                        for r in result.rows),
            **_budget_summary(getattr(result, "time_budget", None)),
            **{f"{part} s": round(seconds, 2)
               for part, seconds in getattr(result, "timings", {}).items()},
            **({REPORT_KEY: f"{REPORT_DIRECTORY}/{INDEX}"} if triggers is not None else {}),
        },
        findings=_issue_findings(result, triggers),
        verdicts=[NamedVerdict(f"{_where(row)} {_column(row)}", row.verdict, group=row.target)
                  for row in rows],
        matrices=[matrix],
        sweeps=[sweep for group in getattr(result, "groups", ())
                for finding in group.cliffs if (sweep := _cliff_sweep(group, finding))],
        divergences=[_divergence(group) for group in getattr(result, "groups", ())
                     if group.culprit is not None and group.culprit.ops],
        tables=[Table("rows", ROW_COLUMNS, table_rows)]
        + ([Table("conversions", ["precision", "status", "signature", "message"],
                  conversions)] if conversions else [])
        + ([_findings(triggers)] if triggers is not None and triggers.triggers else []),
        environment=environment(rows),
        target_words=target_words([*(r.target for r in rows
                                     if getattr(r, "role", "target") == "target"),
                                   result.reference]),
    )


def _budget_summary(note: BudgetNote | None) -> dict[str, str]:
    """The summary's entries of a run under a time budget: the budget (where it came from,
    how to change it), the plan, what it left unexplored."""
    if note is None:
        return {}
    skipped = {target: count for target, count in note.skipped.items() if count}
    return {"time budget": note.words,
            "planned exploration": f"{note.planned} of {note.budget} predictions per target"
                                   + (f" ({note.note})" if note.note else ""),
            **({"input sets not evaluated": ", ".join(note.unevaluated_sets)}
               if note.unevaluated_sets else {}),
            **({"not explored": ", ".join(note.unexplored_targets)}
               if note.unexplored_targets else {}),
            **({"predictions not made": ", ".join(f"{t} {n}" for t, n in skipped.items())}
               if skipped else {})}


def _issue_findings(result: Any, triggers: TriggerIndex | None) -> list[ReportFinding]:
    """The report's entry of each finding, with what an upstream issue adds
    (:mod:`nebisect.detect.issue`)."""
    findings = getattr(result, "findings", ())
    entries = report_findings(
        findings, [t.commands[0] for t in triggers.triggers] if triggers is not None else [])
    return [issue_finding(entry, finding, result.rows, result.paths)
            for entry, finding in zip(entries, findings, strict=True)]


def report_findings(findings: Sequence[RunFinding], commands: Sequence[str] = ()
                    ) -> list[ReportFinding]:
    """The report's entry of each finding; ``commands[i]`` takes finding ``i + 1``
    further (none: no command)."""
    return [ReportFinding(f.number, f.title, f.symptom, f.attribution, f.smallest.label,
                          f.shows, commands[f.number - 1] if commands else "")
            for f in findings]


def _findings(index: TriggerIndex) -> Table:
    """One row per finding: where its smallest trigger fails, the trigger, the command
    to bisect it."""
    return Table("triggers", FINDING_COLUMNS, [
        [t.number, t.target, t.path, t.signature, t.attribution, t.culprit, t.input_set,
         f"{REPORT_DIRECTORY}/{t.inputs}", t.commands[0]] for t in index.triggers])


def _cliff_sweep(group: Any, finding: Any) -> CliffSweep | None:
    """The model-level cliff plot: every target's output against the family's parameter
    (None when the cliff was not charted)."""
    series = {name: [_value(v) for v in values] for name, values in finding.series.items()}
    if group.target not in series:
        return None
    cliff = finding.cliff
    predicted = cliff.predicted
    where = f"{group.target} [{group.path}]" if group.path else group.target
    return CliffSweep(
        title=f"{finding.family} cliff, {group.signature} on {where}",
        x=list(finding.chart_x), output=series.pop(group.target),
        reference=series.pop("reference", [math.nan] * len(finding.chart_x)),
        target=group.target, bracket=[cliff.lo, cliff.hi],
        bracket_outputs=[_value(cliff.lo_output), _value(cliff.hi_output)],
        predicted_boundary=None if predicted is None else float(predicted["value"]),
        predicted_label="" if predicted is None else str(predicted["label"]),
        predictions=finding.spent, x_label=f"{finding.family} parameter x",
        y_label=f"output {_element(cliff.element)}", series=series,
    )


def _element(element: dict[str, Any] | None) -> str:
    """``op_out[0, 3]`` where the cliff breaks, ``(first element)`` without one."""
    return "(first element)" if element is None else str(Element.from_dict(element))


def _divergence(group: Any) -> Divergence:
    """The per-op divergence chart of one failure group, its culprit marked."""
    culprit = group.culprit
    where = f"{group.target} [{group.path}]" if group.path else group.target
    return Divergence(
        title=f"{group.attribution} at {culprit.describe()}: {group.signature} on {where}",
        ops=list(culprit.ops), first_divergent=culprit.op, target=group.target,
        unit=f"ULP at {group.target}",
    )


def _value(value: Any) -> float:
    return math.nan if value is None else float(value)


def _where(row: Any) -> str:
    """The target, with its conversion path when it has one (a path converted with
    nebisect's converter overrides twice: its failure at coremltools' defaults, and its
    program as so converted)."""
    path = getattr(row, "path", "")
    if is_cured_failure(row.verdict):
        path = f"{path}, defaults" if path else "defaults"
    elif path and OVERRIDES_NOTE in row.verdict.target_facts.notes:
        path = f"{path}, overrides"
    return f"{row.target} [{path}]" if path else str(row.target)


def _column(row: Any) -> str:
    input_set = getattr(row, "input_set", None)
    return str(input_set.label) if input_set is not None else str(row.length)


def write_run_report(report_dir: str | os.PathLike[str], result: Any,
                     triggers: TriggerIndex | None = None) -> Any:
    """Write report.json/report.html of a run into ``report_dir`` (``--report``)."""
    from nebisect.report import write_report

    return write_report(report_dir, "run", run_payload(result, triggers))

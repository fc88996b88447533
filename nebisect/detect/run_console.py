"""A run's report on the terminal: its findings, the matrix table, where the exploration's
predictions went, margins and placement notes (rich markup, on stdout)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from nebisect.detect.candidates import candidate_lines
from nebisect.detect.compression import check_lines
from nebisect.detect.placement_notes import placement_lines
from nebisect.detect.realistic import REALISTIC_FACTOR, margin_line
from nebisect.detect.same_precision import note_line
from nebisect.detect.summary import (
    cache_lines,
    domain_lines,
    finding_lines,
    gap_lines,
    gaps,
    prediction_lines,
    state_lines,
)
from nebisect.report.tables import Column, fitted_table
from nebisect.sources.convert import is_cured_failure
from nebisect.verdict import placement_summary

if TYPE_CHECKING:
    from nebisect.detect.findings import Row
    from nebisect.detect.matrix import RunReport
    from nebisect.detect.triggers import TriggerIndex
    from nebisect.verdict import Verdict


def print_run(result: RunReport, index: TriggerIndex | None) -> None:
    """One block per finding, most severe first (with the command that bisects its saved
    trigger, when ``index`` has them); then the matrix, one line per target and path;
    what nebisect could not judge; where the exploration's predictions went; margins;
    notes on the precision findings torch computes as badly at the same precision."""
    console = Console()
    if result.reference_note:
        console.print(escape(f"reference: {result.reference_note}"), highlight=False,
                      soft_wrap=True)
    _print_reference_failures(console, result)
    for finding in result.findings:
        command = index.triggers[finding.number - 1].commands[0] if index is not None else ""
        for line in finding_lines(finding, next_command=command):
            console.print(line, highlight=False, soft_wrap=True)
    _print_matrix(console, result)
    for line in [*(escape(line) for line in check_lines(result.compression)),
                 *map(escape, gap_lines(result.rows)), *prediction_lines(result.explorations),
                 *map(escape, result.time_budget.lines() if result.time_budget else []),
                 *state_lines(result), *cache_lines(result), *domain_lines(result),
                 *(escape(margin_line(finding, result.input_scale, result.undeclared))
                   for finding in result.far_findings),
                 *(escape(note_line(finding, result.torch_peers))
                   for finding in result.shared_with_torch),
                 *([escape(f"note: {result.torch_note}")] if result.torch_note else []),
                 *map(escape, candidate_lines(result.findings, result.hazards)),
                 *(escape(note) for note in placement_lines(result.rows))]:
        console.print(line, highlight=False, soft_wrap=True)
    if result.interrupted:
        console.print(f"[yellow]{result.interrupted}: only the rows above were evaluated[/]")
    elif not result.failed:
        judged = "the targets nebisect could judge" if gaps(result.rows) else "all targets"
        within = (f" at inputs within {REALISTIC_FACTOR:g}× of those the run starts from"
                  if result.far_findings else "")
        shared = (" as closely as torch does at their precision"
                  if result.shared_with_torch else "")
        console.print(f"[green]{judged} agree with the reference{within}{shared}[/]")


def _function(result: RunReport) -> str:
    """The function of a multifunction package the matrix judged, or the compression a
    torch source was judged under (``run --compress``), as the title names it."""
    compressed = f", {result.compressed.words}" if result.compressed else ""
    return (f" --function {result.function}" if result.function else "") + compressed


def _print_matrix(console: Console, result: RunReport) -> None:
    """The input sets every run evaluates (``example``, the lengths), one line per
    target and conversion path: how many passed, the failures' signatures, the worst
    metrics. Explored input sets are the findings' business."""
    cured = set(result.cured_paths)
    multipath = len({r.path for r in result.rows if r.path}) > 1 or bool(cured)
    cells_of: dict[tuple[str, str, str], list[Row]] = {}
    for row in result.rows:
        if not row.explored:
            # a path converted with nebisect's converter overrides: its failure at
            # coremltools' defaults, and its program as so converted, are lines apart
            path = (f"{row.path} (defaults)".lstrip() if is_cured_failure(row.verdict)
                    else f"{row.path} (overrides)" if row.path in cured else row.path)
            cells_of.setdefault((row.role, row.target, path), []).append(row)
    columns = [Column("target"), *([Column("path")] if multipath else []),
               Column("input sets"), Column("verdict"), Column("max ULP", "right"),
               Column("cosine", "right", optional=True), Column("placement"),
               Column("max abs", "right", optional=True), Column("time s", "right", optional=True)]
    table_rows = []
    for (role, target, path), rows in cells_of.items():
        failing = [r for r in rows if r.verdict.failed]
        skipped = all(r.verdict.status == "skipped" for r in rows)
        style = "red" if failing else "yellow" if skipped else "green"
        verdicts = ", ".join(dict.fromkeys(_short(r.verdict, role) for r in failing or rows))
        passed = f"{len(rows) - len(failing)} of {len(rows)} pass" if failing else (
            f"{len(rows)}" if len(rows) > 1 else rows[0].input_set.label)
        measured = [r.verdict.error_metrics for r in rows if r.verdict.error_metrics]
        table_rows.append([
            target, *([path] if multipath else []), passed, f"[{style}]{verdicts}[/]",
            _fmt(max((m.max_ulp_error for m in measured), default=None)),
            _fmt(min((m.min_cosine for m in measured), default=None), ".6f"),
            placement_summary(rows[0].verdict.placement),
            _fmt(max((m.max_abs_error for m in measured), default=None)),
            _fmt(sum(r.verdict.timings.total or 0.0 for r in rows), ".2f"),
        ])
    table, dropped = fitted_table(
        f"nebisect run {result.source}{_function(result)}  (reference {result.reference})",
        columns, table_rows,
        console.width,
    )
    console.print(table)
    if dropped:
        console.print(f"[dim]not shown at this terminal width: {', '.join(dropped)} "
                      "(--json has every metric)[/]")


def _print_reference_failures(console: Console, result: RunReport) -> None:
    notes = {id(row) for row in result.reference_notes}
    for row in result.rows:
        if row.role != "reference":
            continue
        v = row.verdict
        said = (f"reference {row.target} @ {row.length or 'static'}: reference failed "
                f"({v.status} at stage {v.stage}): {v.signature}; no target was judged "
                "against it")
        if id(row) in notes:
            console.print(escape(f"note: {said} (inputs nebisect generated: not a finding; "
                                 "--input-range declares what the model takes)"),
                          highlight=False, soft_wrap=True)
        else:
            console.print(f"[red]✗[/] {escape(said)}", highlight=False, soft_wrap=True)


def _short(verdict: Verdict, role: str) -> str:
    """The verdict as it fits a table cell: status, plus kind or signal where it has one."""
    if role == "reference":
        return f"reference failed: {verdict.signature}"
    if verdict.status == "skipped":
        return "not judged" if verdict.stage == "reference" else "skipped"
    if verdict.status in ("mismatch", "crash"):
        return verdict.signature
    return verdict.status


def _fmt(value: object, spec: str = ".3g") -> str:
    return "" if value is None else format(float(value), spec)  # type: ignore[arg-type]

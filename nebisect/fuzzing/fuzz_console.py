"""A fuzz campaign on the terminal: the progress bar summed over campaigns, the fuzzable
ops, the summary by root cause, and the results as JSON."""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from nebisect.detect.summary import finding_lines
from nebisect.fuzzing import reporting
from nebisect.fuzzing.causes import root_causes
from nebisect.opspecs.ops import registered_ops
from nebisect.report import to_jsonable

if TYPE_CHECKING:
    from nebisect.fuzzing.campaign import CampaignProgress, CampaignResult
    from nebisect.fuzzing.model_findings import ModelFindings
    from nebisect.fuzzing.session import FuzzOptions


class CampaignDisplay:
    """A rich progress bar summed over every campaign: cases, cases/s, distinct failures
    (signature × parameter class; the summary groups them by root cause)."""

    def __init__(self, console: Console, total: int) -> None:
        self.bar = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]:>6.0f} cases/s"),
            TextColumn("[red]{task.fields[findings]} distinct failures"), TimeElapsedColumn(),
            console=console, transient=False,
        )
        self.task = self.bar.add_task("fuzzing", total=total, rate=0.0, findings=0)
        self.units: dict[int, CampaignProgress] = {}
        self.lock = threading.Lock()
        self.start = time.perf_counter()

    def __call__(self, unit: int, progress: CampaignProgress) -> None:
        with self.lock:
            self.units[unit] = progress
            values = list(self.units.values())
        elapsed = time.perf_counter() - self.start
        evaluations = sum(p.evaluations for p in values)
        self.bar.update(
            self.task, completed=sum(p.generated for p in values),
            description=f"{progress.subject} ({progress.phase})",
            rate=evaluations / elapsed if elapsed > 0 else 0.0,
            findings=sum(p.findings for p in values),
        )


def print_ops(as_json: bool) -> None:
    """The fuzzable ops: a table, or JSON."""
    specs = registered_ops()
    if as_json:
        typer.echo(json.dumps([{"op": s.name, "family": s.family, "mil_op": s.op_type,
                                "description": s.doc} for s in specs.values()], indent=2))
        return
    table = Table(title=f"{len(specs)} fuzzable MIL ops")
    for column in ("op", "family", "description"):
        table.add_column(column)
    for spec in specs.values():
        table.add_row(spec.name, spec.family, spec.doc)
    Console().print(table)


def print_summary(console: Console, results: list[CampaignResult], options: FuzzOptions,
                  stored: bool, model: ModelFindings | None = None) -> None:
    """Per subject what was run and found, then the findings and what the words mean: for
    an op, one block per root cause (law, brackets, cases); for a model (``model``: its
    campaign's findings explained), ``run``'s findings."""
    for result in results:
        if result.skipped:
            console.print(f"[yellow]{result.subject}: skipped[/] — {result.skipped}")
            continue
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(result.statuses.items()))
        stopped = " [yellow](interrupted before its budget was spent)[/]" if (
            result.interrupted) else ""
        found = len(model.findings) if model is not None else len(root_causes(result.findings))
        cases = len(result.findings)
        failing = f" ({cases} failing cases)" if cases != found else ""
        console.print(
            f"{result.subject}: {result.generated} cases generated, {result.evaluations} "
            f"evaluated ({statuses}) in {result.elapsed:.1f}s — "
            f"{found} finding{'s' if found != 1 else ''}{failing}{stopped}"
        )
    causes = reporting.causes(results)
    if not causes:
        console.print(f"[green]No findings on {options.target}[/] (seed {options.seed}).")
        return
    console.print(f"[bold]Findings on {options.target}[/] (seed {options.seed}):")
    if model is not None:
        for finding in model.findings:
            for line in finding_lines(finding):
                console.print(line, highlight=False)
    else:
        for cause in causes:
            for line in reporting.cause_lines(cause):
                console.print(line, highlight=False)
    for line in reporting.legend(results):
        console.print(f"  [dim]{line}[/]")
    console.print(
        "  [dim]cliff: two adjacent fp16 values of x between which the output goes from "
        "right to wrong, both read at the element that breaks (x: every element of the "
        "first input for --op; the value family's parameter for a model — const: every "
        "element = x); theory: the boundary the op's overflow law (or lint, for a model) "
        "predicts; predictions: isolated runs the bisection needed.[/]"
    )
    if not stored:
        console.print("  [dim]Pass --corpus DIR to keep every finding as a regression case.[/]")


def results_json(results: list[CampaignResult], options: FuzzOptions,
                 model: ModelFindings | None = None) -> dict[str, Any]:
    """Every result as recorded, with its findings' root causes (``causes``: the law
    and the positions of its findings in ``findings``); for a model, also ``run``'s
    ``findings`` and ``groups`` of its explained cases (in ``run --json``'s forms)."""
    def body(result: CampaignResult) -> dict[str, Any]:
        index = {id(f): i for i, f in enumerate(result.findings)}
        return {**result.to_dict(),
                "causes": [c.to_dict(index) for c in root_causes(result.findings)]}

    explained = {} if model is None else {
        "findings": [f.to_dict() for f in model.findings],
        "groups": [g.to_dict() for g in model.groups]}
    return to_jsonable({
        "target": options.target, "seed": options.seed, "budget": options.budget,
        "wrap": options.wrap, "results": [body(r) for r in results], **explained,
    })

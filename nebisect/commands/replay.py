"""``nebisect replay``: the corpus as a CI guard."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

from nebisect.commands.corpus import print_problems, short_signature
from nebisect.errors import NebisectError
from nebisect.executors import CLUSTER_ENV
from nebisect.isolation.timeouts import Timeouts
from nebisect.options.generate import cli_command
from nebisect.options.parsers import parse_memory
from nebisect.options.replay_table import REPLAY
from nebisect.report.safe_text import markup

if TYPE_CHECKING:
    from nebisect.api import ReplayReport
    from nebisect.corpus.store import CorpusCase, Problem
    from nebisect.guard.devices import DeviceMatrix
    from nebisect.guard.replay import ReplayResult, ReplaySummary

ORDER = 50

_STYLES = {"ok": "green", "regression": "bold red", "improved": "cyan", "skipped": "yellow"}


REPLAY_HELP = """\
Run every case in isolation and compare with its expected status.

Exit 0 when every replayed case behaves as recorded. Exit 1 on a regression — a
fixed/pass case that fails, or a failing case whose signature changed — on a
damaged case (it no longer guards anything), and when no case ran at all (unless
--allow-empty): a guard that guarded nothing is not green. Exit 2 on usage errors.
Cases for targets unavailable here are skipped with the reason.
"""

def _replay(root: Path, junit: Path | None, force: bool, as_json: bool,
            devices: str | None, **options: Any) -> None:
    """``nebisect replay`` (its help is :data:`REPLAY_HELP`): :func:`nebisect.api.replay`
    of the corpus at ``root``, the results reported, the exit code by regressions and
    damage; ``--devices`` replays on each device of a cluster instead."""
    from nebisect import api
    from nebisect.corpus import Corpus
    from nebisect.report.outputs import output_file

    if junit:
        output_file(junit, "--junit", force=force, inputs=[("the corpus", root)])
    if devices is not None:
        timeouts = Timeouts.parse(options["timeout"])
        scan = Corpus(root).scan()
        _replay_devices(scan.cases, scan.problems, options["cluster"], devices,
                        options["target"] or (), timeouts, parse_memory(options["memory"]),
                        as_json, options["update"])
    try:
        report = api.replay(root, **options)
    except api.Stopped as stop:
        assert isinstance(stop.result, api.ReplayReport)
        _emit(stop.result, junit, as_json)
        raise
    _emit(report, junit, as_json)
    if report.empty:
        Console(stderr=True).print(
            f"nebisect: no case was replayed ({len(report.summary.results)} case(s) in "
            f"{markup(root)}, all skipped or filtered out); exit 1 (--allow-empty accepts "
            "that)", highlight=False)
    raise typer.Exit(0 if report.ok else 1)


replay = cli_command(REPLAY, _replay)


def _replay_devices(cases: Sequence[CorpusCase], problems: Sequence[Problem], cluster: str | None,
                    devices: str, targets: Sequence[str], timeouts: Timeouts,
                    memory: int | None, as_json: bool, update: bool) -> None:
    """``--devices``: the case × device matrix; exit 1 on a regression in any cell."""
    from nebisect.executors.cluster import ClusterExecutor
    from nebisect.executors.runner import Runner
    from nebisect.guard.devices import replay_devices

    if update:
        raise NebisectError("--devices cannot be combined with --update")
    with Runner(cluster=cluster, memory=memory) as runner:
        executor = runner.executor
        if not isinstance(executor, ClusterExecutor):
            raise NebisectError(f"--devices needs --cluster ADDRESS (or ${CLUSTER_ENV})")
        with Console(stderr=True).status("replaying on every selected device"):
            matrix = replay_devices(cases, executor, devices, targets=targets,
                                    timeouts=timeouts)
    if as_json:
        typer.echo(json.dumps({"devices": [asdict(d) for d in matrix.devices],
                               "cells": [c.to_dict() for c in matrix.cells]},
                              indent=2, default=str))
    else:
        _print_matrix(matrix, problems)
    damaged = [p for p in problems if p.damaged]
    raise typer.Exit(1 if matrix.regressions or damaged or not matrix.cells else 0)


def _print_matrix(matrix: DeviceMatrix, problems: Sequence[Problem]) -> None:
    console = Console()
    table = Table(title="nebisect replay: case × device")
    table.add_column("case", overflow="fold")
    for device in matrix.devices:
        table.add_column(f"{markup(device.label)} ({len(device.workers)} worker(s))",
                         overflow="fold")
    width = len(matrix.devices)
    for start in range(0, len(matrix.cells), width):
        row = matrix.cells[start:start + width]
        table.add_row(markup(row[0].label), *(f"[{_STYLES[c.outcome]}]{c.outcome}[/] "
                                              f"{markup(short_signature(c.verdict.signature))}"
                                              for c in row))
    console.print(table)
    for cell in matrix.cells:
        if cell.outcome != "ok":
            console.print(f"[{_STYLES[cell.outcome]}]{cell.outcome}[/] {markup(cell.label)} on "
                          f"{markup(cell.device['label'])} ({markup(cell.device['address'])}): "
                          f"{markup(cell.reason)}", highlight=False)
    print_problems(console, problems)


def _emit(report: ReplayReport, junit: Path | None, as_json: bool) -> None:
    """The JUnit file and the JSON or table (also of a replay that was stopped)."""
    if junit:
        from nebisect.guard.replay import DAMAGED_SIGNATURE
        from nebisect.report.junit import write_junit
        from nebisect.verdict import Stage, Status, Verdict

        entries = [(r.label, r.junit_verdict()) for r in report.summary.results]
        entries += [(p.path.name,
                     Verdict(Status.ERROR, Stage.LOAD, DAMAGED_SIGNATURE, message=p.reason))
                    for p in report.damaged]
        write_junit(junit, "nebisect.replay", entries)
    if as_json:
        typer.echo(report.to_json())
    else:
        _print(report.summary, report.problems, report.updated)


def _print(
    summary: ReplaySummary, problems: Sequence[Problem], updated: Sequence[ReplayResult]
) -> None:
    console = Console()
    table = Table(title="nebisect replay")
    table.add_column("case", overflow="fold")
    table.add_column("target", no_wrap=True)
    table.add_column("outcome", no_wrap=True)
    table.add_column("verdict", overflow="fold")
    table.add_column("time s", justify="right", no_wrap=True)
    for r in summary.results:
        table.add_row(markup(r.label), markup(r.target), f"[{_STYLES[r.outcome]}]{r.outcome}[/]",
                      markup(short_signature(r.verdict.signature)),
                      f"{r.verdict.timings.wall or 0.0:.2f}")
    console.print(table)
    for r in summary.results:
        if r.outcome != "ok" and r.selected:
            console.print(f"[{_STYLES[r.outcome]}]{r.outcome}[/] {markup(r.label)} "
                          f"({markup(r.case_id)}): {markup(r.reason)}", highlight=False)
    print_problems(console, problems)
    for r in updated:
        console.print(f"re-recorded {markup(r.label)}: expected now follows "
                      f"{markup(r.verdict.signature)}", highlight=False)
    counts = ", ".join(f"{summary.count(o)} {o}" for o in ("ok", "regression", "improved",
                                                           "skipped"))
    console.print(f"{len(summary.results)} case(s): {counts}")


def register(app: typer.Typer) -> None:
    app.command("replay", help=REPLAY_HELP)(replay)

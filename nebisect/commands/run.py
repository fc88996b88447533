"""``nebisect run``: isolated multi-target runs with attribution."""

from __future__ import annotations

import functools
import json
import platform
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from nebisect.case import INPUTS_LIMIT_HELP, NebisectError
from nebisect.inputs import DEFAULT_LENGTHS
from nebisect.timeouts import TIMEOUT_HELP, TIMEOUT_METAVAR, Timeouts

if TYPE_CHECKING:
    from nebisect.matrix import RunReport
    from nebisect.verdict import Verdict

ORDER = 10
#: For torch sources the converted program is also run exactly: its row says whether
#: conversion preserved the math (and feeds the ``conversion`` attribution).
EXACT_ROW = "sim:fp64"

SOURCE_HELP = (
    "An .mlpackage (ML program), or a torch model as path/to/file.py:factory. The factory "
    "takes no arguments and returns a dict with 'module' (torch.nn.Module), "
    "'example_inputs' (dict name → tensor; the names become the Core ML input names) and "
    "optionally 'dynamic_dims' ({input: {axis: (min, max)}}). See examples/meanpool.py."
)


def default_targets() -> list[str]:
    """Real Core ML compute units on macOS; the simulator's fp32/fp16/ANE models elsewhere."""
    if platform.system() == "Darwin":
        return ["coreml:cpu", "coreml:gpu", "coreml:ne", "coreml:all"]
    return ["sim:fp32", "sim:fp16", "sim:ane"]


def _lengths(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise NebisectError(f"--lengths {text!r}: give comma-separated integers") from None
    if not values or min(values) < 1:
        raise NebisectError(f"--lengths {text!r}: lengths must be positive")
    return values


def run(
    source: str = typer.Argument(..., help=SOURCE_HELP),
    target: list[str] = typer.Option(
        None, "--target", "-t",
        help="Target spec (repeatable), e.g. sim:ane, coreml:ne, torch:cpu:fp32. "
        "Default: coreml:cpu,gpu,ne,all on macOS; sim:fp32, sim:fp16, sim:ane elsewhere.",
    ),
    inputs: Path = typer.Option(
        None, "--inputs",
        help=f"An .npz of named inputs (loaded without pickle). {INPUTS_LIMIT_HELP}",
    ),
    lengths: str = typer.Option(
        ",".join(map(str, DEFAULT_LENGTHS)), "--lengths",
        help="Lengths for every flexible dimension, clipped to its range.",
    ),
    reference: str = typer.Option(
        "", "--reference", help="Oracle target (default: sim:fp64; torch:cpu:fp64 for torch)."
    ),
    timeout: list[str] = typer.Option(
        None, "--timeout", metavar=TIMEOUT_METAVAR, help=TIMEOUT_HELP
    ),
    converter_overrides: bool = typer.Option(
        False, "--converter-overrides",
        help="Install nebisect's converter overrides (the converter-compat fix) before "
        "converting a torch source; without it you see what plain coremltools does.",
    ),
    deployment_target: str = typer.Option(
        "", "--deployment-target", metavar="TARGET",
        help="Core ML deployment target to convert a torch source for (e.g. macOS14, iOS18). "
        "Default: the newest this macOS loads (iOS18 elsewhere).",
    ),
    plugin: list[str] = typer.Option(
        None, "--plugin",
        help="A module or .py file registering extra targets (repeatable); imported only in "
        "isolated children, never in nebisect's own process.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the matrix as JSON."),
    report: Path = typer.Option(None, "--report", help="Write report.json/report.html here."),
) -> None:
    """Run every prediction in a fresh process on each target and compare with a float64
    reference; say where a divergence enters (conversion, precision, device).

    The torch source's factory and every --plugin are loaded in isolated children: one
    that raises, exits, crashes or hangs is a one-line error (exit 2). A reference that
    fails is a row of its own ("reference failed"); the targets it should have judged are
    shown as not judged.

    Exit code: 0 all pass, 1 a failure was found (a failing reference included), 2 usage
    or input error.
    """
    from nebisect.isolate import Isolator
    from nebisect.matrix import MatrixRunner
    from nebisect.outputs import output_directory
    from nebisect.source import resolve_source
    from nebisect.sources.plugins import use_plugins
    from nebisect.targets import spec_of
    from nebisect.targets.macos import check_deployment

    timeouts = Timeouts.parse(timeout)
    check_deployment(deployment_target)
    if report:
        output_directory(report, "--report")
    console = Console(stderr=True)
    with tempfile.TemporaryDirectory(prefix="nebisect-run-") as tmp, Isolator() as isolator:
        plugins = use_plugins(plugin or [], timeout=timeouts.load, isolator=isolator)
        targets = list(target or default_targets())
        for spec in [*targets, *([reference] if reference else [])]:
            spec_of(spec)
        resolved = resolve_source(source, timeout=timeouts.load, isolator=isolator)
        if resolved.kind == "torch" and EXACT_ROW not in targets:
            targets.insert(0, EXACT_ROW)
        workdir = Path(tmp)
        with console.status("running") as status:
            runner = MatrixRunner(
                resolved, targets, workdir, isolator, reference=reference, timeouts=timeouts,
                convert=_converter(converter_overrides, deployment_target), plugins=plugins,
                progress=lambda msg: status.update(msg),
            )
            try:
                result = runner.run(_lengths(lengths), str(inputs) if inputs else "")
            except KeyboardInterrupt as stop:
                # Ctrl-C, SIGTERM, SIGHUP: the rows evaluated so far, marked as such.
                from nebisect.interrupt import describe

                status.stop()
                runner.report.interrupted = describe(stop)
                _emit(runner.report, report, as_json)
                raise
        _emit(result, report, as_json)
    raise typer.Exit(1 if result.failed else 0)


def _emit(result: RunReport, report: Path | None, as_json: bool) -> None:
    """The --report files and the JSON or table (also of a run that was stopped)."""
    if report:
        from nebisect.report import write_run_report

        write_run_report(report, result)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        _print(result)


def _converter(overrides: bool, deployment: str) -> Callable[..., Any]:
    from nebisect.convert import OVERRIDES_SETUP, convert_isolated

    setup = (OVERRIDES_SETUP,) if overrides else ()
    return functools.partial(convert_isolated, setup=setup, deployment=deployment)


def _print(result: RunReport) -> None:
    from nebisect.tables import Column, fitted_table
    from nebisect.verdict import placement_summary

    console = Console()
    columns = [Column("target"), Column("length", "right"), Column("verdict"),
               Column("max ULP", "right"), Column("cosine", "right", optional=True),
               Column("placement"), Column("max abs", "right", optional=True),
               Column("time s", "right", optional=True)]
    cells = []
    for row in result.rows:
        v = row.verdict
        style = "red" if v.failed else "yellow" if v.status == "skipped" else "green"
        metrics = v.metrics
        cells.append([
            row.target, str(row.length or "static"), f"[{style}]{_short(v, row.role)}[/]",
            _fmt(metrics.get("max_ulp_error")), _fmt(metrics.get("min_cosine"), ".6f"),
            placement_summary(v.placement), _fmt(metrics.get("max_abs_error")),
            _fmt(v.timings.get("total"), ".2f"),
        ])
    table, dropped = fitted_table(
        f"nebisect run {result.source}  (reference {result.reference})", columns, cells,
        console.width,
    )
    console.print(table)
    if dropped:
        console.print(f"[dim]not shown at this terminal width: {', '.join(dropped)} "
                      "(--json has every metric)[/]")
    # One line per distinct failure: the same signature at five lengths is one finding.
    failures: dict[tuple[str, str, str, str, str], list[str]] = {}
    _print_reference_failures(console, result)
    for row in result.rows:
        v = row.verdict
        if v.failed and row.role == "target":
            key = (row.target, v.status, v.stage, row.attribution, v.signature)
            failures.setdefault(key, []).append(str(row.length or "static"))
    for (target, status, stage, attribution, signature), lengths in failures.items():
        console.print(
            f"[red]✗[/] {target} @ {', '.join(lengths)}: {status} at stage {stage}, "
            f"attribution [bold]{attribution}[/]: {signature}",
            highlight=False, soft_wrap=True,
        )
    if result.interrupted:
        console.print(f"[yellow]{result.interrupted}: only the rows above were evaluated[/]")
    elif not result.failed:
        console.print("[green]all targets agree with the reference[/]")


def _print_reference_failures(console: Console, result: RunReport) -> None:
    for row in result.rows:
        if row.role == "reference":
            v = row.verdict
            console.print(
                f"[red]✗[/] reference {row.target} @ {row.length or 'static'}: reference failed "
                f"({v.status} at stage {v.stage}): {v.signature}; no target was judged against "
                "it", highlight=False, soft_wrap=True,
            )


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


def register(app: typer.Typer) -> None:
    app.command("run")(run)

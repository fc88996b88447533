"""``nebisect run``: isolated multi-target runs with attribution."""

from __future__ import annotations

import functools
import json
import platform
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.markup import escape

from nebisect.bounds import MAX_JOBS, check_count, check_seed
from nebisect.case import INPUTS_LIMIT_HELP, REFERENCE_TARGET
from nebisect.commands._options import (
    CONVERT_CHOICES,
    INPUT_RANGE_HELP,
    MEMORY_HELP,
    parse_budget,
    parse_choice,
    parse_families,
    parse_input_ranges,
    source_path,
    use_memory,
)
from nebisect.detect import DEFAULT_BUDGET
from nebisect.errors import NebisectError
from nebisect.executors import CLUSTER_ENV, CLUSTER_HELP
from nebisect.executors.local import LOCAL
from nebisect.isolation.timeouts import TIMEOUT_HELP, TIMEOUT_METAVAR, Timeouts
from nebisect.sources.inputs import DEFAULT_LENGTHS

if TYPE_CHECKING:
    from nebisect.detect.findings import Row
    from nebisect.detect.matrix import RunReport
    from nebisect.detect.triggers import TriggerIndex
    from nebisect.verdict import Verdict

ORDER = 10
#: For torch sources the converted program is also run exactly: its row says whether
#: conversion preserved the math (and feeds the ``conversion`` attribution).
EXACT_ROW = REFERENCE_TARGET

SOURCE_HELP = (
    "An .mlpackage (ML program), or a torch model as path/to/file.py:factory. The factory "
    "takes no arguments and returns a dict with 'module' (torch.nn.Module), "
    "'example_inputs' (dict name → tensor, or a tuple of tensors named by forward()'s "
    "parameters, else x0, x1, … by position as for forward(*args); the names become the "
    "Core ML input names) and optionally 'dynamic_dims' ({input: {axis: (min, max)}}). "
    "See examples/meanpool.py."
)
EXPLORE_CHOICES = ("auto", "none")
#: the devices ``--require`` makes placement fail closed on
REQUIRE_CHOICES = ("ne", "gpu")


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
    if not values:
        raise NebisectError(f"--lengths {text!r}: give at least one length")
    return tuple(check_count(f"--lengths {value}", value) for value in values)


def run(
    source: str = typer.Argument(None, help=SOURCE_HELP, show_default=False),
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
        "", "--reference",
        help=f"Oracle target (default: {REFERENCE_TARGET}; torch:cpu:fp64 for torch).",
    ),
    timeout: list[str] = typer.Option(
        None, "--timeout", metavar=TIMEOUT_METAVAR, help=TIMEOUT_HELP
    ),
    memory: str = typer.Option(None, "--memory", metavar="SIZE", help=MEMORY_HELP,
                               show_default=False),
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
    explore: str = typer.Option(
        "auto", "--explore",
        help="auto: also evaluate the factory's example inputs and search the value families "
        "(--list-families) within --budget predictions per target; none: only the lengths "
        "(or --inputs), as run always did.",
    ),
    budget: str = typer.Option(
        str(DEFAULT_BUDGET), "--budget", metavar="N",
        help="Exploration predictions per target (each evaluates every conversion path).",
    ),
    families: str = typer.Option(
        "", "--families", metavar="A,B", help="Explore only these value families (default: all)."
    ),
    list_families: bool = typer.Option(
        False, "--list-families", help="List the value families and exit."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the value families' random draws."),
    input_range: list[str] = typer.Option(
        None, "--input-range", metavar="NAME=LO:HI", help=INPUT_RANGE_HELP),
    convert: str = typer.Option(
        "both", "--convert", metavar="export|trace|both",
        help="Torch conversion paths: torch.export, jit.trace, or both (every path that "
        "converts is evaluated; a bug may live on one).",
    ),
    jobs: int = typer.Option(
        None, "--jobs", "-j", show_default=False,
        help="Matrix cells and targets' explorations evaluated in parallel, each in "
        "isolated processes of its own (default: the cores this process may use).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the matrix as JSON."),
    report: Path = typer.Option(
        None, "--report",
        help="Write report.json/report.html here, and the findings' triggers as with "
        "--save-triggers into its triggers/ (bisect --finding DIR/report.json#N).",
    ),
    save_triggers: Path = typer.Option(
        None, "--save-triggers", metavar="DIR",
        help="Write each finding's smallest failing inputs as DIR/N.npz (N: the finding's "
        "number, as --inputs reads it) and DIR/triggers.json: where each fails and the "
        "next commands (bisect, corpus add).",
    ),
    cluster: str = typer.Option(None, "--cluster", envvar=CLUSTER_ENV, help=CLUSTER_HELP),
    require: list[str] = typer.Option(
        None, "--require", metavar="ne|gpu",
        help="Fail closed on placement (repeatable): a target that places ops on this "
        "device and ran every compute op elsewhere is 'unrouted', a failure. Without it "
        "placement is information: a note per target, never a failure.",
    ),
) -> None:
    """Run every prediction in a fresh process on each target and compare with a float64
    reference; say where a divergence enters (conversion, precision, device).

    It goes looking: besides the lengths (or --inputs) it evaluates the factory's example
    inputs and value families (constant fills, scaled normals, spikes, special values,
    …), probing first the input magnitudes lint predicts overflow fp16, and localizes a
    cliff to two adjacent fp16 values. Each root cause is one finding — one culprit op,
    one symptom (crash, error, nonfinite, collapse, shape, integer, tolerance), however
    many targets, paths and input sets show it — most severe first, with where it shows,
    its smallest trigger and the command that bisects it; then the matrix, one line per
    target and path. --json has every row, the failure groups and a findings array.

    The torch source's factory and every --plugin are loaded in isolated children: one
    that raises, exits, crashes or hangs is a one-line error (exit 2), as is a package
    whose program cannot load (a missing or corrupt weight file, an unknown op, a
    cycle). A target whose outputs are not numeric arrays fails with an error of its
    own. A reference that fails is a row of its own ("reference failed"); the targets
    it should have judged are shown as not judged.

    Placement is information: ops a target such as sim:ane or coreml:ne runs off its
    device are a note per target (counted per op type, with the reason); with
    --require ne a target that ran every compute op off the Neural Engine is 'unrouted'.

    Exit code: 0 all pass, 1 a failure was found (a failing reference included), 2 usage
    or input error.
    """
    from nebisect.detect.discover import Discovery
    from nebisect.detect.matrix import MatrixRunner
    from nebisect.executors import open_executor
    from nebisect.isolate import Isolator
    from nebisect.isolation.pool import crew, default_jobs
    from nebisect.report.outputs import apart_from_inputs, output_directory
    from nebisect.report.progress import progress_line
    from nebisect.sources.deployment import check_deployment
    from nebisect.sources.resolve import is_torch_location, resolve_source
    from nebisect.sources.torch_module import CONVERSION_PRELOAD
    from nebisect.targets import spec_of
    from nebisect.targets.plugins import use_plugins

    if list_families:
        _list_families()
        return
    if not source:
        raise NebisectError("give a SOURCE (an .mlpackage or path/to/file.py:factory)")
    timeouts = Timeouts.parse(timeout)
    use_memory(memory)
    check_deployment(deployment_target)
    paths = CONVERT_CHOICES[parse_choice("--convert", convert, CONVERT_CHOICES)]
    check_seed(f"--seed {seed}", seed)
    discovery = None if parse_choice("--explore", explore, EXPLORE_CHOICES) == "none" else (
        Discovery(parse_budget(budget), parse_families(families), seed))
    chosen_lengths = _lengths(lengths)
    ranges = parse_input_ranges(input_range)
    jobs = default_jobs() if jobs is None else check_count(f"--jobs {jobs}", jobs, MAX_JOBS)
    required = tuple(dict.fromkeys(parse_choice("--require", device, REQUIRE_CHOICES)
                                   for device in require or ()))
    for directory, option in ((report, "--report"), (save_triggers, "--save-triggers")):
        if directory:
            apart_from_inputs(directory, option, [
                ("the source", source_path(source)), *([("--inputs", inputs)] if inputs else [])])
            output_directory(directory, option)
    outputs = _Outputs(report, save_triggers, source, _fixes(converter_overrides))
    console = Console(stderr=True)
    with tempfile.TemporaryDirectory(prefix="nebisect-run-") as tmp, Isolator() as isolator, \
            crew(isolator, jobs) as isolators, open_executor(cluster, jobs) as executor:
        if is_torch_location(source):
            # Describing the factory and converting it both fork from the warm conversion
            # template: it starts importing now.
            isolator.prestart(CONVERSION_PRELOAD)
        plugins = use_plugins(plugin or [], timeout=timeouts.load, isolator=isolator)
        asked = list(target or default_targets())
        targets = list(asked)
        for spec in [*targets, *([reference] if reference else [])]:
            spec_of(spec)
        resolved = resolve_source(source, timeout=timeouts.load,
                                  isolator=isolator).with_domains(ranges)
        if discovery is not None:
            discovery.targets = list(targets)
        if resolved.kind == "torch" and EXACT_ROW not in targets:
            targets.insert(0, EXACT_ROW)
        workdir = Path(tmp)
        with progress_line(console, "running") as progress:
            runner = MatrixRunner(
                resolved, targets, workdir, isolator, reference=reference, timeouts=timeouts,
                convert=_converter(converter_overrides, paths,
                                     deployment_target), plugins=plugins,
                progress=progress, paths=paths, discovery=discovery,
                jobs=jobs, crew=isolators, require=required,
                # Locally the cells run one by one on the run's own warm isolator: a batch
                # on the local executor would start a fork template per thread per batch.
                executor=None if executor.name == LOCAL else executor,
            )
            try:
                result = runner.run(chosen_lengths, str(inputs) if inputs else "")
            except KeyboardInterrupt as stop:
                # Ctrl-C, SIGTERM, SIGHUP: every helper is killed now, then the rows
                # evaluated so far are written, marked as such.
                from nebisect.isolation.interrupt import describe

                for each in isolators:
                    each.abort()
                progress.stop()
                runner.report.interrupted = describe(stop)
                runner.report.regroup()
                _emit(runner.report, outputs, runner.bench.saved, as_json)
                raise
        _require_a_judged_target(result, asked)
        _emit(result, outputs, runner.bench.saved, as_json)
    raise typer.Exit(1 if result.failed else 0)


def _require_a_judged_target(result: RunReport, asked: list[str]) -> None:
    """A run whose asked-for targets all skipped (``coreml:*`` off a Mac) judged nothing:
    that is an input error, never "all targets agree"."""
    rows = [r for r in result.rows if r.target in asked and r.role == "target"]
    if result.failed or any(r.verdict.status != "skipped" for r in rows):
        return
    reasons = {r.target: r.verdict.message.removeprefix("skipped: ") for r in rows}
    raise NebisectError("nothing ran: " + "; ".join(
        f"{name} cannot run here ({reasons.get(name) or 'skipped'})" for name in asked))


@dataclass
class _Outputs:
    """Where a run's results go besides stdout: ``--report``, ``--save-triggers``; the
    source as typed and the converter fixes, which the saved next commands repeat."""

    report: Path | None
    triggers: Path | None
    source: str
    fixes: tuple[str, ...]

    def write(self, result: RunReport, saved: Mapping[str, str]) -> TriggerIndex | None:
        """The triggers of ``result``'s groups (inputs files by input-set label in
        ``saved``) and the report, which names the triggers saved beside it; the index
        whose commands the table shows (``--save-triggers``'s first), None if none."""
        from nebisect.detect.triggers import REPORT_DIRECTORY, save_triggers

        def save(directory: Path) -> TriggerIndex:
            return save_triggers(directory, [f.representative for f in result.findings],
                                 result.rows, saved,
                                 source=result.source, typed=self.source, fixes=self.fixes)

        shown = save(self.triggers) if self.triggers else None
        if self.report:
            from nebisect.detect.report import write_run_report

            beside = save(self.report / REPORT_DIRECTORY)
            write_run_report(self.report, result, beside)
            shown = shown or beside
        return shown


def _fixes(converter_overrides: bool) -> tuple[str, ...]:
    """The converter fixes a run converts with (``--converter-overrides``)."""
    from nebisect.fixes.converter_compat import ConverterCompat

    return (ConverterCompat.name,) if converter_overrides else ()


def _emit(result: RunReport, outputs: _Outputs, saved: Mapping[str, str],
          as_json: bool) -> None:
    """The output files and the JSON or table (also of a run that was stopped)."""
    index = outputs.write(result, saved)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2, default=str))
    else:
        _print(result, index)


def _converter(overrides: bool, paths: tuple[str, ...], deployment: str) -> Callable[..., Any]:
    from nebisect.sources.convert import OVERRIDES_SETUP, convert_paths

    setup = (OVERRIDES_SETUP,) if overrides else ()
    return functools.partial(convert_paths, setup=setup, paths=paths,
                             deployment=deployment)


def _list_families() -> None:
    from nebisect.inputs.families import listing

    for name, description in listing():
        typer.echo(f"{name:<10} {description}")


def _print(result: RunReport, index: TriggerIndex | None) -> None:
    """One block per finding, most severe first (with the command that bisects its saved
    trigger, when ``index`` has them); then the matrix, one line per target and path;
    where the exploration's predictions went; margins."""
    from nebisect.detect.placement_notes import placement_lines
    from nebisect.detect.summary import domain_lines, finding_lines, prediction_lines

    console = Console()
    _print_reference_failures(console, result)
    for finding in result.findings:
        command = index.triggers[finding.number - 1].commands[0] if index is not None else ""
        for line in finding_lines(finding, next_command=command):
            console.print(line, highlight=False, soft_wrap=True)
    _print_matrix(console, result)
    for line in [*prediction_lines(result.explorations), *domain_lines(result),
                 *(escape(note) for note in placement_lines(result.rows))]:
        console.print(line, highlight=False, soft_wrap=True)
    if result.interrupted:
        console.print(f"[yellow]{result.interrupted}: only the rows above were evaluated[/]")
    elif not result.failed:
        console.print("[green]all targets agree with the reference[/]")


def _print_matrix(console: Console, result: RunReport) -> None:
    """The input sets every run evaluates (``example``, the lengths), one line per
    target and conversion path: how many passed, the failures' signatures, the worst
    metrics. Explored input sets are the findings' business."""
    from nebisect.report.tables import Column, fitted_table
    from nebisect.verdict import placement_summary

    multipath = len({r.path for r in result.rows if r.path}) > 1
    cells_of: dict[tuple[str, str, str], list[Row]] = {}
    for row in result.rows:
        if not row.explored:
            cells_of.setdefault((row.role, row.target, row.path), []).append(row)
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
            _fmt(sum(r.verdict.timings.get("total", 0.0) for r in rows), ".2f"),
        ])
    table, dropped = fitted_table(
        f"nebisect run {result.source}  (reference {result.reference})", columns, table_rows,
        console.width,
    )
    console.print(table)
    if dropped:
        console.print(f"[dim]not shown at this terminal width: {', '.join(dropped)} "
                      "(--json has every metric)[/]")


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

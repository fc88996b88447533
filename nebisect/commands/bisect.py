"""``nebisect bisect``: minimize a failing model to the smallest piece that fails the same way."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from nebisect.case import INPUTS_LIMIT_HELP
from nebisect.commands._options import (
    CONVERT_CHOICES,
    MEMORY_HELP,
    parse_budget,
    parse_choice,
    use_memory,
)
from nebisect.detect import DEFAULT_BUDGET
from nebisect.errors import NebisectError
from nebisect.isolation.timeouts import TIMEOUT_HELP, TIMEOUT_METAVAR, Timeouts

if TYPE_CHECKING:
    from nebisect.minimize.bisector import BisectResult
    from nebisect.minimize.options import ProgressLine

ORDER = 20
#: ``--timeout`` is the whole search's budget here, so the per-step limits (the same
#: grammar as every other command's ``--timeout``) are ``--case-timeout``.
CASE_TIMEOUT_HELP = (
    "Per isolated step (--timeout is the whole search's budget here). "
    + TIMEOUT_HELP.replace("--timeout", "--case-timeout")
    + " Defaults: load 300, convert 900, predict 600."
)


class _Display:
    """The live line "1 000 ops → 3 ops, 21 evaluations" over a bar on stderr (the bar
    fills towards --max-evals when given, and pulses otherwise)."""

    def __init__(self, console: Console) -> None:
        self.bar = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                            TimeElapsedColumn(), console=console, transient=False)
        self.task = self.bar.add_task("starting", total=None)

    def __call__(self, line: ProgressLine) -> None:
        self.bar.update(self.task, description=line.text(), completed=line.evaluations,
                        total=line.max_evals)

    def __enter__(self) -> _Display:
        self.bar.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """The last state stays on screen after a result; an error's one line replaces
        it (the line says what failed)."""
        if kind is not None:
            self.bar.live.transient = True
        self.bar.stop()


def bisect(
    source: str = typer.Argument(
        None, show_default=False,
        help="An .mlpackage (ML program), or a torch model as path/to/file.py:factory.",
    ),
    target: str = typer.Option(None, "--target", "-t", show_default=False,
                               help="Where the failure shows, e.g. sim:ane, coreml:ne."),
    finding: str = typer.Option(
        None, "--finding", metavar="FILE#N", show_default=False,
        help="Failure group N of a run: FILE is its report.json (run --report) or the "
        "triggers.json of run --save-triggers; it gives the source, target, conversion "
        "path, inputs and converter fixes.",
    ),
    stage: str = typer.Option(
        "predict", "--stage",
        help="predict: reduce the ML program op by op (torch sources are converted first); "
        "convert: reduce the torch graph node by node, submodules first.",
    ),
    graph: str = typer.Option(
        "auto", "--graph",
        help="What to reduce: mil (the ML program's ops; default at --stage predict) or fx "
        "(the torch graph's nodes; always at --stage convert, optional at predict for torch "
        "sources — e.g. when the converter emitted different math).",
    ),
    inputs: Path = typer.Option(
        None, "--inputs",
        help="An .npz of named inputs. Without it (at --stage predict) run's discovery "
        "looks for a trigger on the target first (the example inputs, --length, then the "
        f"value families within --budget predictions). {INPUTS_LIMIT_HELP}",
    ),
    convert: str = typer.Option(
        "both", "--convert", metavar="export|trace|both",
        help="Torch conversion paths tried, in order: the first that converts is reduced.",
    ),
    budget: str = typer.Option(
        str(DEFAULT_BUDGET), "--budget", metavar="N",
        help="Predictions spent looking for a trigger when no --inputs are given.",
    ),
    length: int = typer.Option(8, "--length",
                               help="Length of flexible dimensions for generated inputs."),
    max_evals: int = typer.Option(None, "--max-evals",
                                  help="Stop after this many candidate evaluations."),
    timeout: float = typer.Option(None, "--timeout",
                                  help="Stop after this many seconds (best result so far)."),
    case_timeout: list[str] = typer.Option(
        None, "--case-timeout", metavar=TIMEOUT_METAVAR,
        help=CASE_TIMEOUT_HELP,
    ),
    memory: str = typer.Option(None, "--memory", metavar="SIZE", help=MEMORY_HELP,
                               show_default=False),
    fix: list[str] = typer.Option(
        None, "--fix", help="Converter fix to convert a torch source with (repeatable), "
        "e.g. converter-compat.",
    ),
    out: Path = typer.Option(Path("nebisect-bisect"), "--out",
                             help="Output directory: new or empty, unless --force."),
    force: bool = typer.Option(False, "--force",
                               help="Write into a non-empty --out (files of the same names "
                               "are replaced; never the source or --inputs)."),
    as_json: bool = typer.Option(False, "--json", help="Print summary.json to stdout."),
) -> None:
    """Reduce a failing model to the smallest piece that fails with the same signature on
    the same target; write the minimized model, inputs.npz, a standalone repro.py and
    summary.json to --out.

    Without --inputs the failure is looked for first, as run looks for it, and the first
    one found is reduced (the line "trigger: …" says which). --finding takes a failure
    group of a run instead of SOURCE, --target and --inputs.

    Ctrl-C, --max-evals and --timeout stop the search and still write the best result.
    The files are built aside and moved into --out at the end: a failed write (a full
    disk) leaves --out as it was. Exit code: 0 written, 2 usage error, nothing to
    bisect (exploration found no failure either), or a failed write.
    """
    from nebisect.commands._options import source_path
    from nebisect.minimize.bisector import bisect_source
    from nebisect.minimize.options import BISECT_TIMEOUTS, BisectOptions
    from nebisect.report.outputs import fresh_output_directory

    paths = CONVERT_CHOICES[parse_choice("--convert", convert, CONVERT_CHOICES)]
    use_memory(memory)
    fixes = tuple(fix or ())
    if finding:
        if source or target or inputs:
            raise NebisectError("--finding names the source, target and inputs; give "
                                "no SOURCE, --target or --inputs with it")
        from nebisect.detect.triggers import read_finding

        found = read_finding(finding)
        trigger = found.trigger
        source, target, inputs = found.source, trigger.target, found.inputs
        stage = "convert" if trigger.stage == "convert" else stage
        fixes = (*trigger.fixes, *fixes)
        paths = (trigger.path,) if trigger.path else paths
        graph = trigger.graph if graph == "auto" else graph
    elif not source or not target:
        raise NebisectError("give a SOURCE and --target, or --finding FILE#N")
    options = BisectOptions(target=target, stage=stage,
                            inputs=os.path.abspath(inputs) if inputs else "",
                            length=length, max_evals=max_evals, timeout=timeout,
                            fixes=fixes, graph=graph, paths=paths, budget=parse_budget(budget),
                            timeouts=Timeouts.parse(case_timeout, BISECT_TIMEOUTS,
                                                    "--case-timeout"))
    read = [("the source", source_path(source))] + ([("--inputs", inputs)] if inputs else [])
    fresh_output_directory(out, "--out", force=force, inputs=read)
    display = _Display(Console(stderr=True))
    with display:
        result = bisect_source(source, options, out, progress=display)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
    else:
        _print(result, out)


def _print(result: BisectResult, out: Path) -> None:
    from nebisect.minimize.options import thousands

    console = Console()
    state = "complete (1-minimal)" if result.complete else f"stopped: {result.stopped}"
    console.print(
        f"[bold]{thousands(result.units_before)} {result.unit} → "
        f"{thousands(result.units_after)} "
        f"{result.unit}[/], {result.evaluations} evaluations, {result.seconds:.1f} s — {state}",
        highlight=False,
    )
    if result.trigger:
        console.print(f"trigger: {escape(result.trigger)}", highlight=False, soft_wrap=True)
    console.print(f"signature: [red]{result.signature}[/]", highlight=False)
    if result.reduced_signature != result.signature:
        console.print(f"where it enters: [red]{result.reduced_signature}[/]", highlight=False)
    kept = ", ".join(f"{u} ({t})" for u, t in zip(result.kept, result.kept_types, strict=True))
    console.print(f"kept: {kept}", highlight=False)
    console.print(f"wrote {out}/: {', '.join(result.files)}  — run: python {out}/repro.py",
                  highlight=False)


def register(app: typer.Typer) -> None:
    app.command("bisect")(bisect)

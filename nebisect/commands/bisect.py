"""``nebisect bisect``: minimize a failing model to the smallest piece that fails the same way."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from nebisect.case import INPUTS_LIMIT_HELP
from nebisect.isolation.timeouts import TIMEOUT_HELP, TIMEOUT_METAVAR, Timeouts

if TYPE_CHECKING:
    from nebisect.minimize.bisector import BisectResult, ProgressLine

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
        ..., help="An .mlpackage (ML program), or a torch model as path/to/file.py:factory."
    ),
    target: str = typer.Option(..., "--target", "-t",
                               help="Where the failure shows, e.g. sim:ane, coreml:ne."),
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
    inputs: Path = typer.Option(None, "--inputs",
                                help=f"An .npz of named inputs. {INPUTS_LIMIT_HELP}"),
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

    Ctrl-C, --max-evals and --timeout stop the search and still write the best result.
    The files are built aside and moved into --out at the end: a failed write (a full
    disk) leaves --out as it was. Exit code: 0 written, 2 usage error, nothing to
    bisect, or a failed write.
    """
    from nebisect.commands._options import source_path
    from nebisect.minimize.bisector import BISECT_TIMEOUTS, BisectOptions, bisect_source
    from nebisect.report.outputs import fresh_output_directory

    options = BisectOptions(target=target, stage=stage,
                            inputs=os.path.abspath(inputs) if inputs else "",
                            length=length, max_evals=max_evals, timeout=timeout,
                            fixes=tuple(fix or ()), graph=graph,
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
    from nebisect.minimize.bisector import thousands

    console = Console()
    state = "complete (1-minimal)" if result.complete else f"stopped: {result.stopped}"
    console.print(
        f"[bold]{thousands(result.units_before)} {result.unit} → "
        f"{thousands(result.units_after)} "
        f"{result.unit}[/], {result.evaluations} evaluations, {result.seconds:.1f} s — {state}",
        highlight=False,
    )
    console.print(f"signature: [red]{result.signature}[/]", highlight=False)
    if result.reduced_signature != result.signature:
        console.print(f"where it enters: [red]{result.reduced_signature}[/]", highlight=False)
    kept = ", ".join(f"{u} ({t})" for u, t in zip(result.kept, result.kept_types, strict=True))
    console.print(f"kept: {kept}", highlight=False)
    console.print(f"wrote {out}/: {', '.join(result.files)}  — run: python {out}/repro.py",
                  highlight=False)


def register(app: typer.Typer) -> None:
    app.command("bisect")(bisect)

"""``nebisect bisect``: minimize a failing model to the smallest piece that fails the same way."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from nebisect.case import INPUTS_LIMIT_HELP
from nebisect.detect import DEFAULT_BUDGET
from nebisect.isolation.timeouts import TIMEOUT_HELP, TIMEOUT_METAVAR
from nebisect.options.parsers import (
    FUNCTION_HELP,
    MEMORY_HELP,
)

ORDER = 20
#: ``--timeout`` is the whole search's budget here, so the per-step limits (the same
#: grammar as every other command's ``--timeout``) are ``--case-timeout``.
CASE_TIMEOUT_HELP = (
    "Per isolated step (--timeout is the whole search's budget here). "
    + TIMEOUT_HELP.replace("--timeout", "--case-timeout")
    + " Defaults: load 300, convert 900, predict 600."
)

BISECT_HELP = """\
Reduce a failing model to the smallest piece that fails with the same signature on
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


BISECT_SOURCE_ARGUMENT = typer.Argument(
    None, show_default=False,
    help="An .mlpackage (ML program), a saved torch program (.pt2, TorchScript .pt) or a "
    "torch model as path/to/file.py:factory.",
)
BISECT_TARGET_OPTION = typer.Option(
    None, "--target", "-t", show_default=False,
    help="Where the failure shows, e.g. sim:ane, coreml:ne.")
BISECT_FINDING_OPTION = typer.Option(
    None, "--finding", metavar="FILE#N", show_default=False,
    help="Failure group N of a run: FILE is its report.json (run --report) or the "
    "triggers.json of run --save-triggers; it gives the source, target, conversion "
    "path, inputs and converter fixes.",
)
BISECT_STAGE_OPTION = typer.Option(
    "predict", "--stage",
    help="predict: reduce the ML program op by op (torch sources are converted first); "
    "convert: reduce the torch graph node by node, submodules first.",
)
BISECT_GRAPH_OPTION = typer.Option(
    "auto", "--graph",
    help="What to reduce: mil (the ML program's ops; default at --stage predict) or fx "
    "(the torch graph's nodes; always at --stage convert, optional at predict for torch "
    "sources — e.g. when the converter emitted different math).",
)
BISECT_INPUTS_OPTION = typer.Option(
    None, "--inputs",
    help="An .npz of named inputs. Without it (at --stage predict) run's discovery "
    "looks for a trigger on the target first (the example inputs, --length, then the "
    f"value families within --budget predictions). {INPUTS_LIMIT_HELP}",
)
BISECT_CONVERT_OPTION = typer.Option(
    "both", "--convert", metavar="export|trace|both",
    help="Torch conversion paths tried, in order: the first that converts is reduced.",
)
BISECT_BUDGET_OPTION = typer.Option(
    str(DEFAULT_BUDGET), "--budget", metavar="N",
    help="Predictions spent looking for a trigger when no --inputs are given.",
)
BISECT_LENGTH_OPTION = typer.Option(
    8, "--length", help="Length of flexible dimensions for generated inputs.")
BISECT_MAX_EVALS_OPTION = typer.Option(
    None, "--max-evals", help="Stop after this many candidate evaluations.")
BISECT_TIMEOUT_OPTION = typer.Option(
    None, "--timeout", help="Stop after this many seconds (best result so far).")
BISECT_CASE_TIMEOUT_OPTION = typer.Option(
    None, "--case-timeout", metavar=TIMEOUT_METAVAR,
    help=CASE_TIMEOUT_HELP,
)
BISECT_MEMORY_OPTION = typer.Option(
    None, "--memory", metavar="SIZE", help=MEMORY_HELP, show_default=False)
BISECT_FUNCTION_OPTION = typer.Option("", "--function", metavar="NAME", help=FUNCTION_HELP)
BISECT_FIX_OPTION = typer.Option(
    None, "--fix", help="Converter fix to convert a torch source with (repeatable), "
    "e.g. converter-compat.",
)
BISECT_OUT_OPTION = typer.Option(
    Path("nebisect-bisect"), "--out", help="Output directory: new or empty, unless --force.")
BISECT_FORCE_OPTION = typer.Option(False, "--force",
                           help="Write into a non-empty --out (files of the same names "
                           "are replaced; never the source or --inputs).")
BISECT_AS_JSON_OPTION = typer.Option(False, "--json", help="Print summary.json to stdout.")


def bisect(
    source: str = BISECT_SOURCE_ARGUMENT,
    target: str = BISECT_TARGET_OPTION,
    finding: str = BISECT_FINDING_OPTION,
    stage: str = BISECT_STAGE_OPTION,
    graph: str = BISECT_GRAPH_OPTION,
    inputs: Path = BISECT_INPUTS_OPTION,
    convert: str = BISECT_CONVERT_OPTION,
    budget: str = BISECT_BUDGET_OPTION,
    length: int = BISECT_LENGTH_OPTION,
    max_evals: int = BISECT_MAX_EVALS_OPTION,
    timeout: float = BISECT_TIMEOUT_OPTION,
    case_timeout: list[str] = BISECT_CASE_TIMEOUT_OPTION,
    memory: str = BISECT_MEMORY_OPTION,
    fix: list[str] = BISECT_FIX_OPTION,
    out: Path = BISECT_OUT_OPTION,
    force: bool = BISECT_FORCE_OPTION,
    as_json: bool = BISECT_AS_JSON_OPTION,
    function: str = BISECT_FUNCTION_OPTION,
) -> None:
    """``nebisect bisect`` (its help is :data:`BISECT_HELP`): :func:`nebisect.api.bisect`
    on the options as typed, under a live progress bar; its result."""
    from nebisect import api
    from nebisect.minimize.terminal import BisectDisplay, print_result

    with BisectDisplay(Console(stderr=True)) as display:
        report = api.bisect(source, target=target, finding=finding, stage=stage, graph=graph,
                            inputs=inputs, convert=convert, budget=budget, length=length,
                            max_evals=max_evals, timeout=timeout, case_timeout=case_timeout,
                            memory=memory, fix=fix, out=out, force=force, progress=display,
                            function=function)
    if as_json:
        typer.echo(report.to_json())
    else:
        print_result(report.result, out)


def register(app: typer.Typer) -> None:
    app.command("bisect", help=BISECT_HELP)(bisect)

"""``nebisect fix list|apply|verify``: named rewrites, applied and proven on the corpus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from nebisect.bounds import MAX_JOBS, check_count
from nebisect.commands.corpus import print_problems, short_signature
from nebisect.errors import NebisectError
from nebisect.executors import CLUSTER_ENV, CLUSTER_HELP
from nebisect.isolation.timeouts import TIMEOUT_HELP, TIMEOUT_METAVAR, Timeouts
from nebisect.options.parsers import MEMORY_HELP, parse_memory
from nebisect.report.terminal import markup

if TYPE_CHECKING:
    from nebisect.guard.verify import VerifyReport

ORDER = 55

fix_app = typer.Typer(
    help="Named rewrites that cure a failure signature (MIL graph passes, converter "
    "overrides), and their proof against the corpus.",
    no_args_is_help=True,
)

_STYLES = {"fixed": "green", "still failing": "yellow", "regressed": "bold red",
           "unaffected": "dim"}


@fix_app.command("list")
def list_fixes(
    as_json: bool = typer.Option(False, "--json", help="Print the registry as JSON."),
) -> None:
    """Every registered fix: level, what it cures, one line on what it does."""
    from nebisect.fixes import registered_fixes

    fixes = registered_fixes()
    if as_json:
        typer.echo(json.dumps([{"name": name, "level": cls.level, "cures": list(cls.cures),
                                "summary": cls.summary()} for name, cls in fixes.items()],
                              indent=2))
        return
    table = Table(title="nebisect fixes")
    for column in ("name", "level", "cures", "what it does"):
        table.add_column(column, no_wrap=column == "name")
    for name, cls in fixes.items():
        table.add_row(name, cls.level, "\n".join(cls.cures), cls.summary())
    Console().print(table)


@fix_app.command("apply")
def apply(
    names_and_source: list[str] = typer.Argument(
        ..., metavar="NAME... SOURCE",
        help="Fix names, then an .mlpackage or a torch source file.py:factory.",
    ),
    output: Path = typer.Option(
        ..., "--output", "-o",
        help="Where to write the .mlpackage: new, unless --force; never the source or inside it.",
    ),
    force: bool = typer.Option(False, "--force", help="Replace an existing --output."),
    precision: str = typer.Option(
        "fp16", "--precision", help="Conversion precision for torch sources: fp16 | fp32."
    ),
    timeout: list[str] = typer.Option(
        None, "--timeout", metavar=TIMEOUT_METAVAR, help=TIMEOUT_HELP
    ),
    memory: str = typer.Option(None, "--memory", metavar="SIZE", help=MEMORY_HELP,
                               show_default=False),
) -> None:
    """Apply fixes: torch sources are converted with the converter-level fixes, then every
    graph pass runs on the program, and the result is saved as an .mlpackage
    (:func:`nebisect.api.fix`)."""
    from nebisect import api

    if len(names_and_source) < 2:
        raise NebisectError("give at least one fix name and a source")
    with Console(stderr=True).status("applying fixes"):
        report = api.fix(names_and_source[-1], names_and_source[:-1], output=output,
                         force=force, precision=precision, timeout=timeout, memory=memory)
    console = Console()
    for name, state in report.applied.items():
        console.print(f"{name}: {state}", highlight=False)
    console.print(f"wrote {output}")


@fix_app.command("verify")
def verify(
    root: Path = typer.Argument(..., help="Corpus directory."),
    fix: list[str] = typer.Option(None, "--fix", help="Fix to verify (repeat; default: all)."),
    target: list[str] = typer.Option(
        None, "--target", "-t", help="Only cases recorded for these targets (globs allowed)."
    ),
    jobs: int = typer.Option(1, "--jobs", "-j", help="Cases verified in parallel."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    timeout: list[str] = typer.Option(
        None, "--timeout", metavar=TIMEOUT_METAVAR, help=TIMEOUT_HELP
    ),
    memory: str = typer.Option(None, "--memory", metavar="SIZE", help=MEMORY_HELP,
                               show_default=False),
    cluster: str = typer.Option(None, "--cluster", envvar=CLUSTER_ENV, help=CLUSTER_HELP),
) -> None:
    """Replay the corpus without and with the fixes: fixed / still failing / regressed /
    unaffected per case. Exit 1 on a regression, when a case's claimed fix fails it, or
    when a case is damaged (it is not verified)."""
    from nebisect.corpus import Corpus
    from nebisect.executors.runner import Runner
    from nebisect.fixes import resolve_fixes
    from nebisect.guard.replay import selected
    from nebisect.guard.verify import verify as verify_fixes

    fixes = resolve_fixes(fix or None)
    timeouts = Timeouts.parse(timeout)
    limit = parse_memory(memory)
    check_count(f"--jobs {jobs}", jobs, MAX_JOBS)
    scan = Corpus(root).scan()
    cases = [c for c in scan.cases if selected(c, target or ())]
    status = f"verifying {len(fixes)} fix(es) on {len(cases)} case(s)"
    with Console(stderr=True).status(status), Runner(jobs, cluster=cluster, memory=limit) as runner:
        report = verify_fixes(cases, fixes, timeouts=timeouts, runner=runner)
    if as_json:
        typer.echo(json.dumps({"fixes": report.fixes,
                               "cases": [c.to_dict() for c in report.cases]},
                              indent=2, default=str))
    else:
        _print(report)
        print_problems(Console(), scan.problems)
    damaged = any(p.damaged for p in scan.problems)
    raise typer.Exit(0 if report.ok and not damaged else 1)


def _print(report: VerifyReport) -> None:
    console = Console()
    table = Table(title=f"nebisect fix verify ({', '.join(report.fixes)})")
    table.add_column("case", overflow="fold")
    table.add_column("target", no_wrap=True)
    table.add_column("result", no_wrap=True)
    table.add_column("without → with fixes", overflow="fold")
    table.add_column("applied", overflow="fold")
    for c in report.cases:
        applied = [f"{n}×{k}" for n, k in c.rewrites.items() if k] + c.converter_fixes
        after = short_signature(c.after.signature) if c.after else "(unchanged)"
        table.add_row(markup(c.label), markup(c.target),
                      f"[{_STYLES[c.category]}]{c.category}[/]",
                      markup(f"{short_signature(c.before.signature)} → {after}"),
                      markup(", ".join(applied)))
    console.print(table)
    for c in report.cases:
        if c.category == "regressed" or c.promise_broken:
            why = c.detail if c.category == "regressed" else (
                f"claimed fix {', '.join(c.claimed)} leaves it {c.category}: {c.detail}")
            console.print(f"[bold red]✗[/] {markup(c.label)} ({markup(c.case_id)}): "
                          f"{markup(why)}", highlight=False)
    counts = ", ".join(f"{report.count(k)} {k}" for k in _STYLES)
    console.print(f"{len(report.cases)} case(s): {counts}")


def register(app: typer.Typer) -> None:
    app.add_typer(fix_app, name="fix")

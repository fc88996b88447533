"""``nebisect fix list|apply|verify``: named rewrites, applied and proven on the corpus."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

from nebisect.bounds import MAX_JOBS, check_count
from nebisect.commands.corpus import print_problems, short_signature
from nebisect.errors import NebisectError
from nebisect.isolation.timeouts import Timeouts
from nebisect.options.fix_table import APPLY, VERIFY
from nebisect.options.generate import cli_command
from nebisect.options.parsers import parse_memory
from nebisect.report.safe_text import markup

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


def _apply(names_and_source: list[str], output: Path, **options: Any) -> None:
    """Apply fixes: torch sources are converted with the converter-level fixes, then every
    graph pass runs on the program, and the result is saved as an .mlpackage
    (:func:`nebisect.api.fix`)."""
    from nebisect import api

    if len(names_and_source) < 2:
        raise NebisectError("give at least one fix name and a source")
    with Console(stderr=True).status("applying fixes"):
        report = api.fix(names_and_source[-1], names_and_source[:-1], output=output,
                         **options)
    console = Console()
    for name, state in report.applied.items():
        console.print(f"{name}: {state}", highlight=False)
    console.print(f"wrote {output}")


apply = fix_app.command("apply")(cli_command(APPLY, _apply))


def _verify(root: Path, fix: list[str] | None, target: list[str] | None, jobs: int,
            as_json: bool, timeout: list[str] | None, memory: str | None,
            cluster: str | None) -> None:
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


verify = fix_app.command("verify")(cli_command(VERIFY, _verify))


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

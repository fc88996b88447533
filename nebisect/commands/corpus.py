"""``nebisect corpus ls|show|add|rm``: inspect and edit a corpus of minimized cases."""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console
from rich.table import Table

from nebisect.case import INPUTS_LIMIT_HELP, load_npz, parse_target

if TYPE_CHECKING:
    from nebisect.corpus.store import Problem, Recorder

ORDER = 60

corpus_app = typer.Typer(
    help="Inspect and edit a corpus: one verified directory per minimized case.",
    no_args_is_help=True,
)


@corpus_app.command("ls")
def ls(
    root: Path = typer.Argument(..., help="Corpus directory."),
    as_json: bool = typer.Option(False, "--json", help="Print cases and problems as JSON."),
) -> None:
    """List every case (id, name, target, expectation) and every damaged entry."""
    from nebisect.corpus import Corpus

    scan = Corpus(root).scan()
    if as_json:
        typer.echo(json.dumps({
            "cases": [{"path": str(c.path), **json.loads(c.record.to_json())} for c in scan.cases],
            "problems": [{"path": str(p.path), "reason": p.reason, "damaged": p.damaged}
                         for p in scan.problems],
        }, indent=2))
        return
    table = Table(title=f"corpus {root} — {len(scan.cases)} case(s)")
    for column in ("id", "name", "target", "expected", "fixes"):
        table.add_column(column, no_wrap=column in ("id", "target"), overflow="fold")
    for case in scan.cases:
        r = case.record
        expected = short_signature(r.expected.signature) if r.expected.signature else (
            r.expected.status)
        table.add_row(r.case_id, r.name, r.target, expected, ", ".join(r.fixes))
    console = Console()
    console.print(table)
    print_problems(console, scan.problems)


def print_problems(console: Console, problems: Sequence[Problem]) -> None:
    """One line per damaged or unfinished entry (shared by ls, replay and fix verify)."""
    for problem in problems:
        mark = "[red]damaged, skipped[/]" if problem.damaged else "[yellow]note[/]"
        console.print(f"{mark} {problem.path}: {problem.reason}", highlight=False)


def short_signature(signature: str) -> str:
    """``error:convert:<long converter message>`` → ``error:convert``; others unchanged
    (tables stay readable; the full signature is in ``--json`` and the detail lines)."""
    parts = signature.split(":", 2)
    return ":".join(parts[:2]) if parts[0] == "error" else signature


@corpus_app.command("show")
def show(
    root: Path = typer.Argument(..., help="Corpus directory."),
    case_id: str = typer.Argument(..., help="Case id (a unique prefix) or case name."),
) -> None:
    """Print one case's record (verified: every file matches its sha256)."""
    from nebisect.corpus import Corpus

    case = Corpus(root).find(case_id)
    typer.echo(f"# {case.path} (verified)")
    typer.echo(case.record.to_json().rstrip())


@corpus_app.command("add")
def add(
    root: Path = typer.Argument(..., help="Corpus directory (created if missing)."),
    source: str = typer.Argument(..., help="An .mlpackage or a torch source file.py:factory."),
    target: str = typer.Option(..., "--target", "-t", help="Target spec the case runs on."),
    inputs: list[Path] = typer.Option(
        ..., "--inputs",
        help=f"An .npz of named inputs; repeat to add one case per file. {INPUTS_LIMIT_HELP}"
    ),
    stage: str = typer.Option("predict", "--stage", help="convert | load | predict."),
    expect: str = typer.Option(
        "", "--expect",
        help="failing | fixed | pass. Omitted: run the case in isolation and record its verdict.",
    ),
    signature: str = typer.Option("", "--signature", help="Signature of a failing case."),
    name: str = typer.Option("", "--name", help="A human name (unique names help `show`)."),
    description: str = typer.Option("", "--description", help="What the case guards."),
    fixes: list[str] = typer.Option(None, "--fix", help="Fix that claims to cure it (repeat)."),
    op_of_interest: str = typer.Option(
        "", "--op-of-interest", help="Op type that must run on the target's accelerator."
    ),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds per recording run."),
) -> None:
    """Store cases atomically (safe while other writers add to the same corpus)."""
    from nebisect.corpus import Corpus, Expected, NewCase

    parse_target(target)
    kind = "torch" if ".py:" in source else "mlpackage"
    expected = Expected(expect, signature) if expect else None
    options = {"op_of_interest": op_of_interest} if op_of_interest else {}
    if fixes:
        from nebisect.fixes import resolve_fixes

        resolve_fixes(fixes)
    corpus = Corpus(root, create=True)
    with _recorder(expected is None, timeout) as recorder:
        for path in inputs:
            added = corpus.add(NewCase(
                kind, source, target, load_npz(path), expected, stage=stage, options=options,
                name=name, description=description, fixes=list(fixes or []),
            ), recorder)
            record = added.case.record
            state = "added" if added.created else "already present"
            if added.replaced:
                state = f"added (replaced a damaged copy: {added.replaced})"
            typer.echo(f"{state}: {record.case_id} {record.target} expected "
                       f"{record.expected.status} {record.expected.signature}".rstrip())


@contextlib.contextmanager
def _recorder(wanted: bool, timeout: float) -> Iterator[Recorder | None]:
    """A recorder that runs the staged case in isolation (None when not wanted)."""
    if not wanted:
        yield None
        return
    from nebisect.corpus.replay import run_case
    from nebisect.isolate import Isolator

    with Isolator() as isolator, tempfile.TemporaryDirectory(prefix="nebisect-record-") as tmp:
        yield lambda case: run_case(case, isolator, Path(tmp), timeout=timeout).verdict


@corpus_app.command("rm")
def rm(
    root: Path = typer.Argument(..., help="Corpus directory."),
    case_ids: list[str] = typer.Argument(..., help="Case ids (unique prefixes) or names."),
) -> None:
    """Remove cases (a damaged case by its directory name)."""
    from nebisect.corpus import Corpus

    corpus = Corpus(root)
    for key in case_ids:
        typer.echo(f"removed {corpus.remove(key)}")


def register(app: typer.Typer) -> None:
    app.add_typer(corpus_app, name="corpus")

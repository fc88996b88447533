"""``nebisect corpus ls|show|add|rm|gc``: inspect and edit a corpus of minimized cases."""

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

from nebisect.arrays import load_npz
from nebisect.case import CaseOptions, case_stage
from nebisect.errors import NebisectError
from nebisect.isolation.timeouts import Timeouts
from nebisect.options.corpus_table import ADD
from nebisect.options.generate import cli_command
from nebisect.options.parsers import parse_memory
from nebisect.report.safe_text import markup

if TYPE_CHECKING:
    from nebisect.corpus.store import Problem, Recorder
    from nebisect.verdict import Verdict

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
    """List every case (id, name, target, expectation) and every damaged entry.

    Exit 1 when a case is damaged (it no longer guards anything), else 0.
    """
    from nebisect.corpus import Corpus

    scan = Corpus(root).scan()
    damaged = any(p.damaged for p in scan.problems)
    if as_json:
        typer.echo(json.dumps({
            "cases": [{"path": str(c.path), **json.loads(c.record.to_json())} for c in scan.cases],
            "problems": [{"path": str(p.path), "reason": p.reason, "damaged": p.damaged}
                         for p in scan.problems],
        }, indent=2))
        raise typer.Exit(1 if damaged else 0)
    table = Table(title=f"corpus {markup(root)} — {len(scan.cases)} case(s)")
    for column in ("id", "name", "target", "expected", "fixes"):
        table.add_column(column, no_wrap=column in ("id", "target"), overflow="fold")
    for case in scan.cases:
        r = case.record
        expected = short_signature(r.expected.signature) if r.expected.signature else (
            r.expected.status)
        table.add_row(*(markup(cell) for cell in (r.case_id, r.name, r.target, expected,
                                                   ", ".join(r.fixes))))
    console = Console()
    console.print(table)
    print_problems(console, scan.problems)
    raise typer.Exit(1 if damaged else 0)


def print_problems(console: Console, problems: Sequence[Problem]) -> None:
    """One line per damaged or unfinished entry (shared by ls, replay and fix verify);
    the corpus's names and reasons are printed as text (:mod:`nebisect.report.safe_text`)."""
    for problem in problems:
        mark = "[red]damaged, skipped[/]" if problem.damaged else "[yellow]note[/]"
        console.print(f"{mark} {markup(problem.path)}: {markup(problem.reason)}",
                      highlight=False)


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


ADD_HELP = """\
Store cases atomically (safe while other writers add to the same corpus).

Refused with exit 2, nothing stored: inputs that do not fit the model, a torch:*
target (a case runs its converted model; torch is the reference), a source package
holding a symlink or a special file, and a recording run that was skipped (target
unavailable here) or that nebisect itself refused.

A case of a multifunction package (ct.utils.save_multifunction: a prefill/decode
pair) judges one function, --function NAME or the package's default: the package is
stored whole, case.json names the function, and replay runs that function.
"""

def _add(root: Path, source: str, target: str, inputs: list[Path], stage: str,
         expect: str, signature: str, expect_chip: list[str] | None, name: str,
         description: str, fixes: list[str] | None, op_of_interest: str,
         timeout: list[str] | None, memory: str | None, function: str) -> None:
    """``nebisect corpus add`` (its help is :data:`ADD_HELP`): one case recorded per inputs
    file, stored atomically."""
    from nebisect.corpus import Corpus, Expected, NewCase
    from nebisect.executors.runner import Runner
    from nebisect.sources.inputs import check
    from nebisect.sources.resolve import resolve_source
    from nebisect.targets.registry import spec_of

    timeouts = Timeouts.parse(timeout)
    limit = parse_memory(memory)
    if not spec_of(target).runs_programs:
        raise NebisectError(f"--target {target}: a corpus case runs its model converted to "
                            "Core ML; torch is the reference, not a corpus target")
    with Runner(memory=limit, local=True) as runner:
        resolved = resolve_source(source, function=function, timeout=timeouts.load,
                                  isolator=runner.isolator)
    if fixes and resolved.function:
        raise NebisectError(f"--fix: fixes rewrite a package's default program, not one "
                            f"function of a multifunction package ({resolved.function})")
    arrays = [(path, load_npz(path)) for path in inputs]
    for path, named in arrays:
        try:
            check(resolved.inputs, named)
        except NebisectError as exc:
            raise NebisectError(f"{path}: {exc}") from None
    chips = dict(entry.partition("=")[::2] for entry in expect_chip or ())
    if chips and not expect:
        raise NebisectError("--expect-chip needs --expect (the status on every other chip)")
    if any(not family or not status for family, status in chips.items()):
        raise NebisectError("--expect-chip takes FAMILY=STATUS, e.g. m4=fixed")
    expected = Expected(expect, signature, chips=chips) if expect else None
    options = CaseOptions(op_of_interest=op_of_interest or "")
    if fixes:
        from nebisect.fixes import resolve_fixes

        resolve_fixes(fixes)
    corpus = Corpus(root, create=True)
    with _recorder(expected is None, timeouts, limit) as recorder:
        for _, named in arrays:
            added = corpus.add(NewCase(
                resolved.kind, source, target, named, expected, stage=case_stage(stage),
                options=options, name=name, description=description, fixes=list(fixes or []),
                function=resolved.function,
            ), recorder)
            record = added.case.record
            state = "added" if added.created else "already present"
            if added.replaced:
                state = f"added (replaced a damaged copy: {added.replaced})"
            judged = f" function {record.function}" if record.function else ""
            typer.echo(f"{state}: {record.case_id}{judged} {record.target} expected "
                       f"{record.expected.status} {record.expected.signature}".rstrip())


add = corpus_app.command("add", help=ADD_HELP)(cli_command(ADD, _add))


@contextlib.contextmanager
def _recorder(wanted: bool, timeouts: Timeouts, memory: int | None
              ) -> Iterator[Recorder | None]:
    """A recorder that runs the staged case in isolation, under ``memory`` bytes (None
    when not wanted)."""
    if not wanted:
        yield None
        return
    from nebisect.corpus.store import CorpusCase
    from nebisect.executors.runner import Runner
    from nebisect.guard.replay import run_case

    def record(case: CorpusCase) -> Verdict:
        verdict = run_case(case, runner.isolator, Path(tmp), timeouts=timeouts).verdict
        if verdict.status == "skipped" or _refused(verdict):
            raise NebisectError(f"cannot record a run on {case.record.target} "
                                f"({verdict.message}); nothing stored (give --expect)")
        return verdict

    with Runner(memory=memory, local=True) as runner, \
            tempfile.TemporaryDirectory(prefix="nebisect-record-") as tmp:
        yield record


def _refused(verdict: Verdict) -> bool:
    """True when the recording run failed on nebisect's own refusal (a NebisectError in
    the child: a usage error the checks before the run did not catch), which is no bug
    of the model to guard."""
    names, pending = set(), [NebisectError]
    while pending:
        error = pending.pop()
        names.add(error.__name__)
        pending.extend(error.__subclasses__())
    return verdict.status == "error" and verdict.message.partition(":")[0] in names


@corpus_app.command("rm")
def rm(
    root: Path = typer.Argument(..., help="Corpus directory."),
    case_ids: list[str] = typer.Argument(..., help="Case ids (unique prefixes) or names."),
) -> None:
    """Remove cases (a damaged case by its directory name; `corpus gc` removes what
    interrupted writers left)."""
    from nebisect.corpus import Corpus

    corpus = Corpus(root)
    for key in case_ids:
        typer.echo(f"removed {corpus.remove(key)}")


@corpus_app.command("gc")
def gc(
    root: Path = typer.Argument(..., help="Corpus directory."),
    yes: bool = typer.Option(False, "--yes", help="Remove them (default: only list them)."),
) -> None:
    """List (or with --yes remove) what interrupted writers left: `.tmp-*` staging
    directories whose writer is gone, and `.trash-*` directories of an interrupted `rm`.

    A staging directory whose writer is still running is never touched. Exit 0.
    """
    from nebisect.corpus import Corpus

    corpus = Corpus(root)
    if not yes:
        garbage = corpus.garbage()
        for path in garbage:
            typer.echo(f"would remove {path.name}")
        typer.echo(f"{len(garbage)} left-over director(ies); `--yes` removes them"
                   if garbage else "nothing to remove")
        return
    for path in corpus.collect_garbage():
        typer.echo(f"removed {path.name}")


def register(app: typer.Typer) -> None:
    app.add_typer(corpus_app, name="corpus")

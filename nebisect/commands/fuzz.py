"""``nebisect fuzz``: find numeric cliffs and crashes op by op, pinned to adjacent fp16 values."""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from nebisect.commands._options import MEMORY_HELP, use_memory
from nebisect.errors import NebisectError
from nebisect.executors import CLUSTER_ENV, CLUSTER_HELP
from nebisect.isolation.timeouts import TIMEOUT_HELP, TIMEOUT_METAVAR, Timeouts

if TYPE_CHECKING:
    from nebisect.corpus import Corpus
    from nebisect.fuzz.campaign import CampaignProgress, CampaignResult
    from nebisect.fuzz.model_session import ModelSession
    from nebisect.fuzz.session import FuzzOptions

ORDER = 30


class _Display:
    """A rich progress bar summed over every campaign: cases, cases/s, distinct failures
    (signature × parameter class; the summary groups them by root cause)."""

    def __init__(self, console: Console, total: int) -> None:
        self.bar = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]:>6.0f} cases/s"),
            TextColumn("[red]{task.fields[findings]} distinct failures"), TimeElapsedColumn(),
            console=console, transient=False,
        )
        self.task = self.bar.add_task("fuzzing", total=total, rate=0.0, findings=0)
        self.units: dict[int, CampaignProgress] = {}
        self.lock = threading.Lock()
        self.start = time.perf_counter()

    def __call__(self, unit: int, progress: CampaignProgress) -> None:
        with self.lock:
            self.units[unit] = progress
            values = list(self.units.values())
        elapsed = time.perf_counter() - self.start
        evaluations = sum(p.evaluations for p in values)
        self.bar.update(
            self.task, completed=sum(p.generated for p in values),
            description=f"{progress.subject} ({progress.phase})",
            rate=evaluations / elapsed if elapsed > 0 else 0.0,
            findings=sum(p.findings for p in values),
        )


def _list_ops(as_json: bool) -> None:
    from nebisect.opspecs.ops import registered_ops

    specs = registered_ops()
    if as_json:
        typer.echo(json.dumps([{"op": s.name, "family": s.family, "mil_op": s.op_type,
                                "description": s.doc} for s in specs.values()], indent=2))
        return
    table = Table(title=f"{len(specs)} fuzzable MIL ops")
    for column in ("op", "family", "description"):
        table.add_column(column)
    for spec in specs.values():
        table.add_row(spec.name, spec.family, spec.doc)
    Console().print(table)


def _print_summary(console: Console, results: list[CampaignResult], options: FuzzOptions,
                   stored: bool) -> None:
    """Per subject what was run and found, then one block per root cause (law, brackets,
    cases) and what the words mean."""
    from nebisect.fuzz import reporting
    from nebisect.fuzz.causes import root_causes

    for result in results:
        if result.skipped:
            console.print(f"[yellow]{result.subject}: skipped[/] — {result.skipped}")
            continue
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(result.statuses.items()))
        stopped = " [yellow](interrupted before its budget was spent)[/]" if (
            result.interrupted) else ""
        found, cases = len(root_causes(result.findings)), len(result.findings)
        failing = f" ({cases} failing cases)" if cases != found else ""
        console.print(
            f"{result.subject}: {result.generated} cases generated, {result.evaluations} "
            f"evaluated ({statuses}) in {result.elapsed:.1f}s — "
            f"{found} finding{'s' if found != 1 else ''}{failing}{stopped}"
        )
    causes = reporting.causes(results)
    if not causes:
        console.print(f"[green]No findings on {options.target}[/] (seed {options.seed}).")
        return
    console.print(f"[bold]Findings on {options.target}[/] (seed {options.seed}):")
    for cause in causes:
        for line in reporting.cause_lines(cause):
            console.print(line, highlight=False)
    for line in reporting.legend(results):
        console.print(f"  [dim]{line}[/]")
    console.print(
        "  [dim]cliff: two adjacent fp16 values of x between which the output goes from "
        "right to wrong, both read at the element that breaks (x: every element of the "
        "first input for --op; the value family's parameter for a model — const: every "
        "element = x); theory: the boundary the op's overflow law (or lint, for a model) "
        "predicts; predictions: isolated runs the bisection needed.[/]"
    )
    if not stored:
        console.print("  [dim]Pass --corpus DIR to keep every finding as a regression case.[/]")


def _store(results: list[CampaignResult], options: FuzzOptions, corpus: Corpus) -> None:
    from nebisect.fuzz.session import dtype_for
    from nebisect.fuzz.store import record_finding
    from nebisect.fuzz.subject import OpSubject
    from nebisect.opspecs.ops import get_op

    for result in results:
        subject = OpSubject(get_op(result.subject), dtype_for(options.target), options.wrap)
        for finding in result.findings:
            finding.case_dir = record_finding(
                corpus, finding, subject, options.target, reference=options.reference,
                plugins=options.plugins, seed=options.seed,
            )


def _store_model(results: list[CampaignResult], session: ModelSession, corpus: Corpus) -> None:
    from nebisect.fuzz.store import record_model_finding

    options = session.options
    for finding in (f for result in results for f in result.findings):
        finding.case_dir = record_model_finding(
            corpus, finding, session.subject, options.target, reference=session.reference,
            plugins=options.plugins, seed=options.seed,
        )


#: what ``fuzz SOURCE`` rejects, with why: these shape ``--op`` campaigns only
_OP_ONLY = {"--wrap": "wraps embed a single op", "--cluster": "a model campaign runs here"}


def fuzz(
    source: str = typer.Argument(
        None, show_default=False,
        help="A model to fuzz, as run takes it: an .mlpackage or path/to/file.py:factory "
        "(see nebisect run --help). Not with --op.",
    ),
    op: list[str] = typer.Option(
        None, "--op", help="MIL op to fuzz (repeatable or comma-separated), or 'all'."
    ),
    target: str = typer.Option(
        None, "--target", "-t",
        help="Target spec (default: coreml:ne on macOS, sim:ane elsewhere).",
    ),
    budget: int = typer.Option(
        200, "--budget", "-n",
        help="Distinct cases to generate per op, or for SOURCE (at most; one prediction each).",
    ),
    convert: str = typer.Option(
        "both", "--convert", metavar="export|trace|both",
        help="SOURCE only: the torch conversion paths fuzzed (each case runs on one).",
    ),
    families: str = typer.Option(
        "", "--families", metavar="A,B",
        help="SOURCE only: draw from these value families (default: all; see "
        "nebisect run --list-families).",
    ),
    seed: int = typer.Option(0, "--seed", help="Same seed (and --jobs), same findings."),
    jobs: int = typer.Option(
        1, "--jobs", "-j",
        help="Campaigns run in parallel; with more jobs than ops, each op's budget is split "
             "into seeded shards.",
    ),
    wrap: str = typer.Option(
        "none", "--wrap",
        help="none | ne-attract (embed the op as conv → op → linear so a device routes "
             "it to the Neural Engine; the op's own output is judged).",
    ),
    corpus: Path = typer.Option(None, "--corpus", help="Store every finding in this corpus."),
    as_json: bool = typer.Option(False, "--json", help="Print the results as JSON."),
    report: Path = typer.Option(None, "--report", help="Write report.json/report.html here."),
    list_ops: bool = typer.Option(False, "--list-ops", help="List the fuzzable ops and exit."),
    plugin: list[str] = typer.Option(
        None, "--plugin",
        help="A module or .py file registering extra targets (repeatable); imported only in "
        "isolated children, never in nebisect's own process.",
    ),
    isolation: str = typer.Option(
        "persistent", "--isolation",
        help="persistent (fast; failures re-confirmed in a fresh process) | fork | spawn.",
    ),
    shrink_budget: int = typer.Option(
        100, "--shrink-budget",
        help="Evaluations spent shrinking each finding (0: keep findings as found).",
    ),
    timeout: list[str] = typer.Option(
        None, "--timeout", metavar=TIMEOUT_METAVAR,
        help=f"{TIMEOUT_HELP} Defaults: load 300, predict 60.",
    ),
    memory: str = typer.Option(None, "--memory", metavar="SIZE", help=MEMORY_HELP,
                               show_default=False),
    cluster: str = typer.Option(
        None, "--cluster", envvar=CLUSTER_ENV,
        help=f"{CLUSTER_HELP} Each shard (op × --jobs split) is one unit; same --seed and "
        "--jobs, same findings as here.",
    ),
) -> None:
    """Fuzz MIL ops one at a time (--op), or a whole model (SOURCE), against the oracle;
    shrink and localize findings.

    nebisect fuzz --op reduce_log_sum_exp: each case is one op with Hypothesis-drawn
    shapes, params and values, judged against the float64 simulator.

    nebisect fuzz examples/logsumexp_ne.py:model: each case is one of the model's inputs
    drawn from run's value families (constant fills, scaled normals, spikes, special
    values, …: family, its parameter, and a length where an input is flexible), on one
    conversion path, evaluated exactly as run evaluates a cell (torch fp64 is the
    oracle for a torch source). The factory runs only in isolated children.

    Every case runs in an isolated process. Each failure is deduplicated by signature
    and parameter class (op params; or conversion path, family, inputs varied and
    length), shrunk, and — for numeric failures — pinned to two adjacent fp16 values of
    the family's parameter, with the overflow boundary theory (or lint, for a model)
    predicts printed beside it. --corpus keeps each finding as a case replay guards.

    Exit 1 when a failure was found (or no conversion path converts SOURCE), 0 when
    none, 2 on usage errors.
    """
    if list_ops:
        _list_ops(as_json)
        return
    from nebisect.corpus import Corpus
    from nebisect.executors import open_executor
    from nebisect.fuzz.builders import WRAPS
    from nebisect.fuzz.session import (
        FUZZ_TIMEOUTS,
        FuzzOptions,
        Session,
        check_target,
        default_target,
        resolve_ops,
    )
    from nebisect.report.outputs import output_directory

    use_memory(memory)
    if op and source:
        raise NebisectError("give either SOURCE (a model) or --op (ops), not both")
    if not op and not source:
        raise NebisectError("give a SOURCE (an .mlpackage or path/to/file.py:factory) or "
                            "--op OP (--list-ops lists them)")
    if wrap not in WRAPS:
        raise NebisectError(f"unknown --wrap {wrap!r}: one of {', '.join(WRAPS)}")
    options = FuzzOptions(
        target=target or default_target(), budget=budget, seed=seed, jobs=jobs, wrap=wrap,
        isolation=isolation, plugins=tuple(plugin or ()), shrink_budget=shrink_budget,
        timeouts=Timeouts.parse(timeout, FUZZ_TIMEOUTS),
    )
    console = Console(stderr=as_json)
    if source:
        chosen = {"--wrap": wrap != "none", "--cluster": bool(cluster)}
        for name, why in _OP_ONLY.items():
            if chosen[name]:
                raise NebisectError(f"{name} is for --op campaigns ({why})")
        _fuzz_model(source, options, convert, families, corpus, report, as_json, console)
        return
    names = [name.strip() for value in op for name in value.split(",") if name.strip()]
    # Bad ops, targets and corpus paths fail now, not after minutes of fuzzing.
    check_target(options)
    ops = resolve_ops(names)
    store = Corpus(corpus, create=True) if corpus is not None else None
    if report is not None:
        output_directory(report, "--report")
    keep = functools.partial(_store, options=options, corpus=store) if (
        store is not None) else None
    display = _Display(console, budget * len(ops))
    session = Session(names, options)
    try:
        # Connect before the bar shows: a scheduler that cannot be reached is one line.
        with contextlib.ExitStack() as stack:
            executor = (stack.enter_context(open_executor(cluster, mode=isolation))
                        if cluster else None)
            with display.bar:
                session.run(display, executor=executor)
    except KeyboardInterrupt:
        # Ctrl-C, SIGTERM, SIGHUP: keep and report what was found until then.
        _emit(session.results(), options, console, keep, report, as_json)
        raise
    results = session.results()
    for lost in session.lost:
        console.print(f"[yellow]no result[/] {lost}", highlight=False)
    _emit(results, options, console, keep, report, as_json)
    raise typer.Exit(1 if any(result.findings for result in results) else 0)


def _fuzz_model(source: str, options: FuzzOptions, convert: str, families: str,
                corpus: Path | None, report: Path | None, as_json: bool,
                console: Console) -> None:
    """``fuzz SOURCE``: set up (resolve, convert, probe), fuzz, store, report."""
    from nebisect.commands._options import (
        CONVERT_CHOICES,
        parse_choice,
        parse_families,
        source_path,
    )
    from nebisect.corpus import Corpus
    from nebisect.fuzz.model_session import ModelSession
    from nebisect.isolate import Isolator
    from nebisect.report.outputs import apart_from_inputs, output_directory

    paths = CONVERT_CHOICES[parse_choice("--convert", convert, CONVERT_CHOICES)]
    chosen = parse_families(families)
    if report is not None:
        apart_from_inputs(report, "--report", [("the source", source_path(source))])
        output_directory(report, "--report")
    with Isolator() as isolator:
        with console.status("resolving and converting the source"):
            session = ModelSession(source, options, convert=paths, families=chosen,
                                   isolator=isolator)
        try:
            store = Corpus(corpus, create=True) if corpus is not None else None
            keep = functools.partial(_store_model, session=session, corpus=store) if (
                store is not None) else None
            display = _Display(console, options.budget)
            try:
                with display.bar:
                    session.run(display)
            except KeyboardInterrupt:
                _emit(session.results(), options, console, keep, report, as_json)
                raise
            results = session.results()
            _emit(results, options, console, keep, report, as_json)
        finally:
            session.close()
    failed = any(result.findings or result.skipped for result in results)
    raise typer.Exit(1 if failed else 0)


def _emit(results: list[CampaignResult], options: FuzzOptions, console: Console,
          keep: Callable[[list[CampaignResult]], None] | None, report: Path | None,
          as_json: bool) -> None:
    """Store the findings (``keep``), write the report, print the results (also of a
    stopped run)."""
    if keep is not None:
        keep(results)
    if report is not None:
        from nebisect.fuzz.reporting import payload
        from nebisect.report import write_report

        files = write_report(report, "fuzz", payload(results, options.target, options.seed,
                                                     options.budget))
        console.print(f"report: {files.html}")
    if as_json:
        typer.echo(json.dumps(_json(results, options), indent=2))
        return
    _print_summary(console, results, options, stored=keep is not None)


def _json(results: list[CampaignResult], options: FuzzOptions) -> dict[str, Any]:
    """Every result as recorded, with its findings' root causes (``causes``: the law
    and the positions of its findings in ``findings``)."""
    from nebisect.fuzz.causes import root_causes
    from nebisect.report import to_jsonable

    def body(result: CampaignResult) -> dict[str, Any]:
        index = {id(f): i for i, f in enumerate(result.findings)}
        return {**result.to_dict(),
                "causes": [c.to_dict(index) for c in root_causes(result.findings)]}

    return to_jsonable({
        "target": options.target, "seed": options.seed, "budget": options.budget,
        "wrap": options.wrap, "results": [body(r) for r in results],
    })


def register(app: typer.Typer) -> None:
    app.command("fuzz")(fuzz)

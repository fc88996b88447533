"""``nebisect fuzz``: find numeric cliffs and crashes op by op, pinned to adjacent fp16 values."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from nebisect.errors import NebisectError
from nebisect.executors import CLUSTER_ENV, CLUSTER_HELP
from nebisect.isolation.timeouts import TIMEOUT_HELP, TIMEOUT_METAVAR, Timeouts
from nebisect.options import MEMORY_HELP, use_memory

if TYPE_CHECKING:
    from nebisect.corpus import Corpus
    from nebisect.fuzzing.campaign import CampaignResult
    from nebisect.fuzzing.model_findings import ModelFindings
    from nebisect.fuzzing.model_session import ModelSession
    from nebisect.fuzzing.session import FuzzOptions

ORDER = 30


def _store(results: list[CampaignResult], options: FuzzOptions, corpus: Corpus) -> None:
    from nebisect.fuzzing.session import dtype_for
    from nebisect.fuzzing.store import record_finding
    from nebisect.fuzzing.subject import OpSubject
    from nebisect.opspecs.ops import get_op

    for result in results:
        subject = OpSubject(get_op(result.subject), dtype_for(options.target), options.wrap)
        for finding in result.findings:
            finding.case_dir = record_finding(
                corpus, finding, subject, options.target, reference=options.reference,
                plugins=options.plugins, seed=options.seed,
            )


def _store_model(results: list[CampaignResult], session: ModelSession, corpus: Corpus) -> None:
    from nebisect.fuzzing.store import record_model_finding

    options = session.options
    for finding in (f for result in results for f in result.findings):
        finding.case_dir = record_model_finding(
            corpus, finding, session.subject, options.target, reference=session.reference,
            plugins=options.plugins, seed=options.seed,
        )


#: what ``fuzz SOURCE`` rejects, with why: these shape ``--op`` campaigns only
_OP_ONLY = {"--wrap": "wraps embed a single op"}

FUZZ_HELP = """\
Fuzz MIL ops one at a time (--op), or a whole model (SOURCE), against the oracle;
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


FUZZ_SOURCE_ARGUMENT = typer.Argument(
    None, show_default=False,
    help="A model to fuzz, as run takes it: an .mlpackage or path/to/file.py:factory "
    "(see nebisect run --help). Not with --op.",
)
FUZZ_OP_OPTION = typer.Option(
    None, "--op", help="MIL op to fuzz (repeatable or comma-separated), or 'all'."
)
FUZZ_TARGET_OPTION = typer.Option(
    None, "--target", "-t",
    help="Target spec (default: coreml:ne on macOS, sim:ane elsewhere).",
)
FUZZ_BUDGET_OPTION = typer.Option(
    200, "--budget", "-n",
    help="Distinct cases to generate per op, or for SOURCE (at most; one prediction each).",
)
FUZZ_CONVERT_OPTION = typer.Option(
    "both", "--convert", metavar="export|trace|both",
    help="SOURCE only: the torch conversion paths fuzzed (each case runs on one).",
)
FUZZ_FAMILIES_OPTION = typer.Option(
    "", "--families", metavar="A,B",
    help="SOURCE only: draw from these value families (default: all; see "
    "nebisect run --list-families).",
)
FUZZ_SEED_OPTION = typer.Option(0, "--seed", help="Same seed (and --jobs), same findings.")
FUZZ_JOBS_OPTION = typer.Option(
    1, "--jobs", "-j",
    help="Campaigns run in parallel; with more jobs than ops, each op's budget is split "
         "into seeded shards.",
)
FUZZ_WRAP_OPTION = typer.Option(
    "none", "--wrap",
    help="none | ne-attract (embed the op as conv → op → linear so a device routes "
         "it to the Neural Engine; the op's own output is judged).",
)
FUZZ_CORPUS_OPTION = typer.Option(None, "--corpus", help="Store every finding in this corpus.")
FUZZ_AS_JSON_OPTION = typer.Option(False, "--json", help="Print the results as JSON.")
FUZZ_REPORT_OPTION = typer.Option(None, "--report", help="Write report.json/report.html here.")
FUZZ_LIST_OPS_OPTION = typer.Option(False, "--list-ops", help="List the fuzzable ops and exit.")
FUZZ_PLUGIN_OPTION = typer.Option(
    None, "--plugin",
    help="A module or .py file registering extra targets (repeatable); imported only in "
    "isolated children, never in nebisect's own process.",
)
FUZZ_ISOLATION_OPTION = typer.Option(
    "persistent", "--isolation",
    help="persistent (fast; failures re-confirmed in a fresh process) | fork | spawn.",
)
FUZZ_SHRINK_BUDGET_OPTION = typer.Option(
    100, "--shrink-budget",
    help="Evaluations spent shrinking each finding (0: keep findings as found).",
)
FUZZ_TIMEOUT_OPTION = typer.Option(
    None, "--timeout", metavar=TIMEOUT_METAVAR,
    help=f"{TIMEOUT_HELP} Defaults: load 300, predict 60.",
)
FUZZ_MEMORY_OPTION = typer.Option(
    None, "--memory", metavar="SIZE", help=MEMORY_HELP, show_default=False)
FUZZ_CLUSTER_OPTION = typer.Option(
    None, "--cluster", envvar=CLUSTER_ENV,
    help=f"{CLUSTER_HELP} Each shard (an op's or the model's budget split by --jobs) is "
    "one unit; same --seed and --jobs, same findings as here.",
)


def fuzz(
    source: str = FUZZ_SOURCE_ARGUMENT,
    op: list[str] = FUZZ_OP_OPTION,
    target: str = FUZZ_TARGET_OPTION,
    budget: int = FUZZ_BUDGET_OPTION,
    convert: str = FUZZ_CONVERT_OPTION,
    families: str = FUZZ_FAMILIES_OPTION,
    seed: int = FUZZ_SEED_OPTION,
    jobs: int = FUZZ_JOBS_OPTION,
    wrap: str = FUZZ_WRAP_OPTION,
    corpus: Path = FUZZ_CORPUS_OPTION,
    as_json: bool = FUZZ_AS_JSON_OPTION,
    report: Path = FUZZ_REPORT_OPTION,
    list_ops: bool = FUZZ_LIST_OPS_OPTION,
    plugin: list[str] = FUZZ_PLUGIN_OPTION,
    isolation: str = FUZZ_ISOLATION_OPTION,
    shrink_budget: int = FUZZ_SHRINK_BUDGET_OPTION,
    timeout: list[str] = FUZZ_TIMEOUT_OPTION,
    memory: str = FUZZ_MEMORY_OPTION,
    cluster: str = FUZZ_CLUSTER_OPTION,
) -> None:
    """``nebisect fuzz`` (its help is :data:`FUZZ_HELP`): the options, checked, into a
    :class:`~nebisect.fuzzing.session.FuzzOptions`; an op or a model campaign; its results."""
    if list_ops:
        from nebisect.fuzzing.terminal import print_ops

        print_ops(as_json)
        return
    from nebisect.fuzzing.builders import WRAPS
    from nebisect.fuzzing.session import FUZZ_TIMEOUTS, FuzzOptions, default_target

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
        chosen = {"--wrap": wrap != "none"}
        for name, why in _OP_ONLY.items():
            if chosen[name]:
                raise NebisectError(f"{name} is for --op campaigns ({why})")
        _fuzz_model(source, options, cluster, convert, families, corpus, report, as_json,
                    console)
        return
    names = [name.strip() for value in op for name in value.split(",") if name.strip()]
    _fuzz_ops(names, options, cluster, corpus, report, as_json, console)


def _fuzz_ops(names: list[str], options: FuzzOptions, cluster: str | None,
              corpus: Path | None, report: Path | None, as_json: bool,
              console: Console) -> None:
    """``fuzz --op``: check, fuzz every op's shards (on ``cluster`` when given), store,
    report."""
    from nebisect.corpus import Corpus
    from nebisect.executors.runner import Runner
    from nebisect.fuzzing.session import Session, check_target, resolve_ops
    from nebisect.fuzzing.terminal import CampaignDisplay
    from nebisect.report.outputs import output_directory

    # Bad ops, targets and corpus paths fail now, not after minutes of fuzzing.
    check_target(options)
    ops = resolve_ops(names)
    store = Corpus(corpus, create=True) if corpus is not None else None
    if report is not None:
        output_directory(report, "--report")
    keep = functools.partial(_store, options=options, corpus=store) if (
        store is not None) else None
    display = CampaignDisplay(console, options.budget * len(ops))
    session = Session(names, options)
    try:
        # Connect before the bar shows: a scheduler that cannot be reached is one line.
        with Runner(options.jobs, cluster=cluster, mode=options.isolation) as runner, \
                display.bar:
            session.run(runner, display)
    except KeyboardInterrupt:
        # Ctrl-C, SIGTERM, SIGHUP: keep and report what was found until then.
        _emit(session.results(), options, console, keep, report, as_json)
        raise
    results = session.results()
    for lost in session.lost:
        console.print(f"[yellow]no result[/] {lost}", highlight=False)
    _emit(results, options, console, keep, report, as_json)
    raise typer.Exit(1 if any(result.findings for result in results) else 0)


def _fuzz_model(source: str, options: FuzzOptions, cluster: str | None, convert: str,
                families: str, corpus: Path | None, report: Path | None, as_json: bool,
                console: Console) -> None:
    """``fuzz SOURCE``: set up (resolve, convert, probe), fuzz (on ``cluster`` when
    given), store, report."""
    from nebisect.corpus import Corpus
    from nebisect.executors.runner import Runner
    from nebisect.fuzzing.model_session import ModelSession
    from nebisect.fuzzing.terminal import CampaignDisplay
    from nebisect.options import (
        CONVERT_CHOICES,
        parse_choice,
        parse_families,
        source_path,
    )
    from nebisect.report.outputs import apart_from_inputs, output_directory

    paths = CONVERT_CHOICES[parse_choice("--convert", convert, CONVERT_CHOICES)]
    chosen = parse_families(families)
    if report is not None:
        apart_from_inputs(report, "--report", [("the source", source_path(source))])
        output_directory(report, "--report")
    with Runner(options.jobs, cluster=cluster, mode=options.isolation) as runner:
        with console.status("resolving and converting the source"):
            session = ModelSession(source, options, convert=paths, families=chosen,
                                   runner=runner)
        try:
            store = Corpus(corpus, create=True) if corpus is not None else None
            keep = functools.partial(_store_model, session=session, corpus=store) if (
                store is not None) else None
            display = CampaignDisplay(console, options.budget)
            try:
                with display.bar:
                    session.run(display)
            except KeyboardInterrupt:
                stopped = session.results()
                _emit(stopped, options, console, keep, report, as_json,
                      session.findings(stopped[0], explain=False))
                raise
            results = session.results()
            for lost in session.lost:
                console.print(f"[yellow]no result[/] {lost}", highlight=False)
            with console.status("explaining the findings (where each enters, at which op)"):
                explained = session.findings(results[0])
            _emit(results, options, console, keep, report, as_json, explained)
        finally:
            session.close()
    failed = any(result.findings or result.skipped for result in results)
    raise typer.Exit(1 if failed else 0)


def _emit(results: list[CampaignResult], options: FuzzOptions, console: Console,
          keep: Callable[[list[CampaignResult]], None] | None, report: Path | None,
          as_json: bool, model: ModelFindings | None = None) -> None:
    """Store the findings (``keep``), write the report, print the results (also of a
    stopped run); ``model``: a model campaign's findings in ``run``'s form."""
    from nebisect.fuzzing.terminal import print_summary, results_json

    if keep is not None:
        keep(results)
    if report is not None:
        from nebisect.fuzzing.reporting import payload
        from nebisect.report import write_report

        files = write_report(report, "fuzz", payload(results, options.target, options.seed,
                                                     options.budget, model))
        console.print(f"report: {files.html}")
    if as_json:
        typer.echo(json.dumps(results_json(results, options, model), indent=2))
        return
    print_summary(console, results, options, stored=keep is not None, model=model)


def register(app: typer.Typer) -> None:
    app.command("fuzz", help=FUZZ_HELP)(fuzz)

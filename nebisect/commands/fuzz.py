"""``nebisect fuzz``: find numeric cliffs and crashes op by op, pinned to adjacent fp16 values."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from nebisect.executors import CLUSTER_ENV, CLUSTER_HELP
from nebisect.isolation.timeouts import TIMEOUT_HELP, TIMEOUT_METAVAR
from nebisect.options.parsers import FUNCTION_HELP, MEMORY_HELP

if TYPE_CHECKING:
    from nebisect.api import FuzzReport

ORDER = 30



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

A multifunction package (ct.utils.save_multifunction: a prefill/decode pair) is
fuzzed one function at a time: --function NAME, or the package's default function
without it.

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
FUZZ_FUNCTION_OPTION = typer.Option(
    "", "--function", metavar="NAME", help=f"SOURCE only. {FUNCTION_HELP}")
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
    function: str = FUZZ_FUNCTION_OPTION,
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
    """``nebisect fuzz`` (its help is :data:`FUZZ_HELP`): :func:`nebisect.api.fuzz` on
    the options as typed, under a live progress bar; its results."""
    from nebisect import api

    if list_ops:
        from nebisect.fuzzing.terminal import print_ops

        print_ops(as_json)
        return
    console = Console(stderr=as_json)
    try:
        result = api.fuzz(source, op=op, target=target, budget=budget, convert=convert,
                          families=families, seed=seed, jobs=jobs, wrap=wrap, corpus=corpus,
                          report=report, plugin=plugin, isolation=isolation,
                          shrink_budget=shrink_budget, timeout=timeout, memory=memory,
                          cluster=cluster, function=function, progress=console)
    except api.Stopped as stop:
        assert isinstance(stop.result, api.FuzzReport)
        _emit(stop.result, console, as_json)
        raise
    _emit(result, console, as_json)
    raise typer.Exit(0 if result.ok else 1)


def _emit(result: FuzzReport, console: Console, as_json: bool) -> None:
    """What was lost, where the report went, the JSON or the summary (also of a
    campaign that was stopped)."""
    from nebisect.fuzzing.terminal import print_summary

    for lost in result.lost:
        console.print(f"[yellow]no result[/] {lost}", highlight=False)
    if result.report_html is not None:
        console.print(f"report: {result.report_html}")
    if as_json:
        typer.echo(result.to_json())
        return
    print_summary(console, result.results, result.options, stored=result.stored,
                  model=result.model)


def register(app: typer.Typer) -> None:
    app.command("fuzz", help=FUZZ_HELP)(fuzz)

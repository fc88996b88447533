"""``nebisect fuzz``: find numeric cliffs and crashes op by op, pinned to adjacent fp16 values."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console

from nebisect.options.fuzz_table import FUZZ
from nebisect.options.generate import cli_command

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


def _fuzz(list_ops: bool, as_json: bool, **options: Any) -> None:
    """``nebisect fuzz`` (its help is :data:`FUZZ_HELP`): :func:`nebisect.api.fuzz` on
    the options as typed, under a live progress bar; its results."""
    from nebisect import api

    if list_ops:
        from nebisect.fuzzing.fuzz_console import print_ops

        print_ops(as_json)
        return
    console = Console(stderr=as_json)
    try:
        result = api.fuzz(options.pop("source"), progress=console, **options)
    except api.Stopped as stop:
        assert isinstance(stop.result, api.FuzzReport)
        _emit(stop.result, console, as_json)
        raise
    _emit(result, console, as_json)
    raise typer.Exit(0 if result.ok else 1)


fuzz = cli_command(FUZZ, _fuzz)


def _emit(result: FuzzReport, console: Console, as_json: bool) -> None:
    """What was lost, where the report went, the JSON or the summary (also of a
    campaign that was stopped)."""
    from nebisect.fuzzing.fuzz_console import print_summary

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

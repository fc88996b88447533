"""``nebisect run``: isolated multi-target runs with attribution."""

from __future__ import annotations

from typing import Any

import typer

from nebisect import api
from nebisect.detect.run_console import print_run
from nebisect.options.generate import cli_command
from nebisect.options.run_table import RUN

ORDER = 10

RUN_HELP = """\
Run every prediction in a fresh process on each target and compare with a float64
reference; say where a divergence enters (conversion, precision, device; with
--baseline or --compress, compression).

It goes looking: besides the lengths (or --inputs) it evaluates the factory's example
inputs and value families (constant fills, scaled normals, spikes, special values,
…), probing first the input magnitudes lint predicts overflow fp16, and localizes a
cliff to two adjacent fp16 values. Each root cause is one finding — one culprit op,
one symptom (crash, error, nonfinite, collapse, shape, integer, tolerance), however
many targets, paths and input sets show it — most severe first, with where it shows,
its smallest trigger and the command that bisects it; then the matrix, one line per
target and path. --json has every row, the failure groups and a findings array.

A torch source is converted on torch.export and jit.trace (--convert). A path that
fails at coremltools' defaults for a reason nebisect's converter overrides cure is
converted again with them and judged all the same: the failure is a 'conversion'
finding, every row and finding on the overridden program says so
(--strict-conversion: the failure ends the path; --converter-overrides: overrides
from the start, no such finding).

The torch source's factory and every --plugin are loaded in isolated children: one
that raises, exits, crashes or hangs is a one-line error (exit 2), as is a package
whose program cannot load (a missing or corrupt weight file, an unknown op, a
cycle). A target whose outputs are not numeric arrays fails with an error of its
own. A reference that fails is a row of its own ("reference failed"); the targets
it should have judged are shown as not judged.

Placement is information: ops a target such as sim:ane or coreml:ne runs off its
device are a note per target (counted per op type, with the reason); with
--require ne a target that ran every compute op off the Neural Engine is 'unrouted'.

A multifunction package (ct.utils.save_multifunction: a prefill/decode pair, LoRA
adapters) is judged function by function, each with its own inputs, the default
first; --function NAME judges that one alone.

Exit code: 0 all pass, 1 a failure was found (a failing reference included), 2 usage
or input error.
"""


def _run(list_families: bool, as_json: bool, **options: Any) -> None:
    """``nebisect run`` (its help is :data:`RUN_HELP`): :func:`nebisect.api.run` on the
    options as typed, then its table or JSON and the exit code."""
    if list_families:
        _list_families()
        return
    try:
        result = api.run(options.pop("source"), **options)
    except api.Stopped as stop:
        assert isinstance(stop.result, api.RunResult)
        _emit(stop.result, as_json)
        raise
    _emit(result, as_json)
    raise typer.Exit(0 if result.ok else 1)


run = cli_command(RUN, _run)


def _emit(result: api.RunResult | api.ProgramsResult, as_json: bool) -> None:
    """The JSON or the table (also of a run that was stopped); an ExecuTorch program's
    delegates, a multifunction package's functions, one after the other."""
    if as_json:
        typer.echo(result.to_json())
    elif isinstance(result, api.ProgramsResult):
        for header, program in zip(result.headers, result.programs, strict=True):
            typer.echo(f"{header} of {result.source}:")
            print_run(program.report, program.triggers)
    else:
        print_run(result.report, result.triggers)


def _list_families() -> None:
    from nebisect.inputs.families import listing

    for name, description in listing():
        typer.echo(f"{name:<10} {description}")


def register(app: typer.Typer) -> None:
    app.command("run", help=RUN_HELP)(run)

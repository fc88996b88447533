"""``nebisect bisect``: minimize a failing model to the smallest piece that fails the same way."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console

from nebisect.options.bisect_table import BISECT
from nebisect.options.generate import cli_command

ORDER = 20
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


def _bisect(as_json: bool, **options: Any) -> None:
    """``nebisect bisect`` (its help is :data:`BISECT_HELP`): :func:`nebisect.api.bisect`
    on the options as typed, under a live progress bar; its result."""
    from nebisect import api
    from nebisect.minimize.bisect_console import BisectDisplay, print_result

    with BisectDisplay(Console(stderr=True)) as display:
        report = api.bisect(options.pop("source"), progress=display, **options)
    if as_json:
        typer.echo(report.to_json())
    else:
        print_result(report.result, options["out"])


bisect = cli_command(BISECT, _bisect)


def register(app: typer.Typer) -> None:
    app.command("bisect", help=BISECT_HELP)(bisect)

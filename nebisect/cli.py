"""The ``nebisect`` command line: a typer app assembled from ``nebisect.commands``.

Each module in ``nebisect/commands`` defines ``register(app)`` and a sort key
``ORDER``; this file only discovers them and turns user errors into one line and
exit code 2 (no traceback dumps), and Ctrl-C, SIGTERM and SIGHUP into a clean stop
(see :mod:`nebisect.interrupt`): one line, exit 128 + the signal number.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

from nebisect import commands, interrupt, quiet
from nebisect.case import NebisectError

app = typer.Typer(
    help=(
        "Find, isolate, minimize and guard against crashes and numeric cliffs in Core ML "
        "models. Every prediction runs in its own process, so a SIGSEGV is a verdict."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)


@app.callback()
def _global_options(
    verbose: bool = typer.Option(
        False, "--verbose", "-v", help="Let coremltools/torch chatter and progress bars through."
    ),
) -> None:
    quiet.VERBOSE = verbose


def _register_commands() -> None:
    modules = [
        importlib.import_module(f"{commands.__name__}.{info.name}")
        for info in pkgutil.iter_modules(commands.__path__)
    ]
    for module in sorted(modules, key=lambda m: (getattr(m, "ORDER", 100), m.__name__)):
        module.register(app)


_register_commands()


def main() -> None:
    """Console-script entry: user errors → ``nebisect: error: …`` on stderr, exit 2;
    an interruption → ``nebisect: interrupted …``, exit 130 (Ctrl-C), 143 (SIGTERM) or
    129 (SIGHUP), after every cleanup ran and the partial results were written."""
    interrupt.install()
    try:
        _run()
    except BaseException:
        # typer turns a KeyboardInterrupt into a silent exit 130, and whatever the
        # unwinding raised after the signal is a consequence of it: which signal it was
        # (and that there was one) is known only here.
        stop = interrupt.received()
        if stop is None:
            raise
        sys.stderr.write(f"nebisect: {interrupt.describe(stop)}; stopped and cleaned up\n")
        sys.exit(stop.exit_code)


def _run() -> None:
    try:
        app()
    except NebisectError as exc:
        one_line = " ".join(str(exc).split())
        sys.stderr.write(f"nebisect: error: {one_line}\n")
        sys.exit(2)
    except OSError as exc:
        # A path the user gave that cannot be read or written (commands check the
        # common cases themselves, with more context); still one line, not a traceback.
        where = f": {exc.filename}" if exc.filename else ""
        sys.stderr.write(f"nebisect: error: {exc.strerror or exc}{where}\n")
        sys.exit(2)

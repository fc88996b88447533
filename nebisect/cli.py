"""The ``nebisect`` command line: a typer app assembled from ``nebisect.commands``.

Each module in ``nebisect/commands`` defines ``register(app)`` and a sort key
``ORDER``; this file only discovers them and turns user errors into one line and
exit code 2 (no traceback dumps, no empty output directory left behind), and Ctrl-C,
SIGTERM and SIGHUP into a clean stop (see :mod:`nebisect.isolation.interrupt`): one
line, exit 128 + the signal number.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import inspect
import os
import pkgutil
import sys

import typer

from nebisect import commands
from nebisect.errors import NebisectError
from nebisect.files import os_reason
from nebisect.isolation import interrupt
from nebisect.isolation.workspace import own_torch_cache
from nebisect.mil import quiet
from nebisect.report.outputs import removed_if_unused
from nebisect.report.safe_text import printable

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
        if not info.name.startswith("_")  # a private helper module, not a command
    ]
    for module in sorted(modules, key=lambda m: (getattr(m, "ORDER", 100), m.__name__)):
        module.register(app)
    _reflow_docstrings(app)


def _reflow_docstrings(typer_app: typer.Typer) -> None:
    """Join the hard-wrapped lines of every command's help into paragraphs.

    A command's help is its ``help=`` text, else its docstring, both wrapped at 100
    columns for the source; rich keeps their line breaks and wraps again at the
    terminal's width, which leaves one-word lines at 80 columns. Blank lines (paragraphs)
    and lines that start a list item or are indented keep their breaks, so lists and
    examples still read as such at any width.
    """
    for info in typer_app.registered_commands:
        callback = info.callback
        if info.help:
            info.help = reflow(inspect.cleandoc(info.help))
        elif callback is not None and callback.__doc__:
            callback.__doc__ = reflow(inspect.cleandoc(callback.__doc__))
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _reflow_docstrings(group.typer_instance)


def reflow(text: str) -> str:
    """``text`` with each paragraph's wrapped lines joined (see :func:`_reflow_docstrings`)."""
    items = ("* ", "- ", "• ")
    lines: list[str] = []
    for line in text.splitlines():
        starts_block = not line.strip() or line.startswith((" ", *items))
        after_list = bool(lines) and lines[-1].startswith((" ", *items))
        if (lines and lines[-1].strip() and not starts_block and not after_list
                and not lines[-1].endswith(":")):
            lines[-1] = f"{lines[-1]} {line.strip()}"
        else:
            lines.append(line)
    return "\n".join(lines)


_register_commands()


def main() -> None:
    """Console-script entry: user errors → ``nebisect: error: …`` on stderr, exit 2;
    an interruption → ``nebisect: interrupted …``, exit 130 (Ctrl-C), 143 (SIGTERM) or
    129 (SIGHUP), after every cleanup ran and the partial results were written."""
    interrupt.install()
    try:
        with own_torch_cache():
            _run()
    except BaseException:
        # typer turns a KeyboardInterrupt into a silent exit 130, and whatever the
        # unwinding raised after the signal is a consequence of it: which signal it was
        # (and that there was one) is known only here.
        stop = interrupt.received()
        if stop is None:
            raise
        sys.stderr.write(f"nebisect: {interrupt.describe(stop)}; stopped and cleaned up\n")
        _exit_now(stop.exit_code)


def _exit_now(code: int) -> None:
    """Exit with ``code`` once the exit handlers ran, without tearing the interpreter
    down: a process that imported torch's op database (the atlas) spends seconds
    garbage-collecting it at exit, and an interrupted command must be gone at once."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _run() -> None:
    try:
        # A command that fails leaves none of the output directories it created empty.
        with removed_if_unused():
            app()
    except NebisectError as exc:
        one_line = printable(" ".join(str(exc).split()))
        sys.stderr.write(f"nebisect: error: {one_line}\n")
        sys.exit(2)
    except OSError as exc:
        # A path the user gave that cannot be read or written (commands check the
        # common cases themselves, with more context); still one line, not a traceback.
        where = f": {exc.filename}" if exc.filename else ""
        sys.stderr.write(f"nebisect: error: {os_reason(exc)}{where}\n")
        sys.exit(2)

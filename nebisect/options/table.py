"""The option table: every option of a command declared once.

One :class:`Option` per option — its flags, the type the CLI reads and the type the
Python API accepts, its default, help text, metavar and environment variable — and per
command the options it takes, in ``--help`` order (a :class:`Command`, in the
``*_table`` module of the command; :mod:`nebisect.options.commands` lists them all).
Options several commands take are declared here, once; a command whose help says
something of its own takes ``OPTION.but(help=…)``. The typer command's signature and
the API function's keyword arguments and docstring are both generated from it
(:mod:`nebisect.options.generate`), so ``--help`` and the docstring cannot disagree.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from nebisect.executors import CLUSTER_ENV, CLUSTER_HELP
from nebisect.isolation.timeouts import TIMEOUT_HELP, TIMEOUT_METAVAR
from nebisect.options.parsers import (
    FUNCTION_HELP,
    INPUT_RANGE_HELP,
    INPUT_RANGE_METAVAR,
    MEMORY_HELP,
)
from nebisect.sources.conversion_cache import CACHE_ENV, MAX_CACHE_BYTES
from nebisect.sources.pickled import NO_PICKLE_ENV

#: what ``lengths``, ``target`` and the other list-valued keywords accept: the CLI's text
#: (one string is one item) or a sequence of values
Many = str | Sequence[Any] | None
#: what ``timeout`` and ``lengths`` accept: :data:`Many`, with numbers for their text
#: (``timeout=30``: 30 seconds, ``lengths=[8, 64]``)
Numbers = str | float | Sequence[str | float] | None
#: what a keyword naming a file or directory accepts (None: not given)
PathOption = str | os.PathLike[str] | None


@dataclass(frozen=True)
class Option:
    """One option as the CLI and the API both take it.

    ``name`` is the API keyword and the typer parameter; ``flags`` the CLI's spellings
    (none: the positional argument); ``cli_type`` the annotation typer parses the text
    with, ``api_type`` what the API keyword accepts; ``default`` is both's (the API
    parses it as it parses the CLI's text; ``...``: the option is required). ``api``
    False: the option only shapes the CLI's output (``--json``), the API has no keyword
    for it."""

    name: str
    flags: tuple[str, ...]
    cli_type: Any
    api_type: Any
    default: Any
    help: str
    metavar: str | None = None
    envvar: str | None = None
    show_default: bool = True
    api: bool = True

    @property
    def argument(self) -> bool:
        """The positional argument (no flags)."""
        return not self.flags

    @property
    def required(self) -> bool:
        return self.default is ...

    def but(self, **changes: Any) -> Option:
        """This option as one command takes it: the same option (name, flags, types)
        with what that command says differently, most often its help text."""
        return replace(self, **changes)


@dataclass(frozen=True)
class Command:
    """A command's options in ``--help`` order."""

    name: str
    options: tuple[Option, ...]

    @property
    def api_options(self) -> tuple[Option, ...]:
        """The options the API function takes as keywords."""
        return tuple(option for option in self.options if option.api)

    def option(self, name: str) -> Option:
        return next(option for option in self.options if option.name == name)


TIMEOUT = Option("timeout", ("--timeout",), list[str], Numbers, None, TIMEOUT_HELP,
                 metavar=TIMEOUT_METAVAR)
MEMORY = Option("memory", ("--memory",), str, str | int | None, None, MEMORY_HELP, metavar="SIZE",
                show_default=False)
CLUSTER = Option("cluster", ("--cluster",), str, str | None, None, CLUSTER_HELP,
                 envvar=CLUSTER_ENV)
CACHE = Option(
    "cache", ("--cache",), str, str | None, None,
    "Keep torch conversions in this directory, by content (the factory file, the module's "
    "weights, the paths, precision, deployment target, overrides and the versions), so "
    "that converting the same model again converts nothing (run, bisect and fuzz SOURCE "
    "all take it). Entries are checked when read; the directory holds at most "
    f"{MAX_CACHE_BYTES >> 30} GiB (least recently used entries go first). Default: "
    f"${CACHE_ENV}, else no cache.", metavar="DIR",
    envvar=CACHE_ENV, show_default=False)
FUNCTION = Option("function", ("--function",), str, str, "", FUNCTION_HELP, metavar="NAME")
PLUGIN = Option(
    "plugin", ("--plugin",), list[str], Many, None,
    "A module or .py file registering extra targets (repeatable); imported only in "
    "isolated children, never in nebisect's own process.")
AS_JSON = Option("as_json", ("--json",), bool, bool, False, "Print the results as JSON.",
                 api=False)
FORCE = Option("force", ("--force",), bool, bool, False, "Replace an existing --output.")
SEED = Option("seed", ("--seed",), int, int, 0, "Seed of the value families' random draws.")
CONVERT = Option(
    "convert", ("--convert",), str, str, "both",
    "Torch conversion paths: torch.export, jit.trace, or both (every path that "
    "converts is evaluated; a bug may live on one).", metavar="export|trace|both")
CONVERTER_OVERRIDES = Option(
    "converter_overrides", ("--converter-overrides",), bool, bool, False,
    "Install nebisect's converter overrides (the converter-compat fix: new_ones, "
    "aten::Int, …) before converting a torch source, on every path. Without it a path "
    "fails at coremltools' defaults first: see --strict-conversion.")
INPUT_RANGE = Option("input_range", ("--input-range",), list[str], Many, None,
                     INPUT_RANGE_HELP, metavar=INPUT_RANGE_METAVAR)
REPORT = Option("report", ("--report",), Path, PathOption, None,
                "Write report.json/report.html here.")
CORPUS_ROOT = Option("root", (), Path, Any, ..., "Corpus directory.", api=False)
CASE_TARGETS = Option(
    "target", ("--target", "-t"), list[str], Many, None,
    "Only cases recorded for these targets (repeatable; globs like 'sim:*').")
NO_PICKLE = Option(
    "no_pickle", ("--no-pickle",), bool, bool, False,
    "Refuse a saved torch program (.pt2) whose loading unpickles — a weight or constant "
    "stored with pickle, an object constant, an archive of the older format — as damaged "
    "data, not code: pickles can run code. The rest loads with torch's weights-only "
    f"unpickler. With --cluster, set ${NO_PICKLE_ENV} on the workers too.",
    envvar=NO_PICKLE_ENV)
CASE_JOBS = Option("jobs", ("--jobs", "-j"), int, int, 1, "Cases evaluated in parallel.")

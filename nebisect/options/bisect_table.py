"""``nebisect bisect``'s options (:mod:`nebisect.options.table`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nebisect.arrays import INPUTS_LIMIT_HELP
from nebisect.detect import DEFAULT_BUDGET
from nebisect.isolation.timeouts import TIMEOUT_HELP, TIMEOUT_METAVAR
from nebisect.options.table import (
    AS_JSON,
    CACHE,
    CONVERT,
    FORCE,
    FUNCTION,
    MEMORY,
    Command,
    Many,
    Numbers,
    Option,
    PathOption,
)

#: ``--timeout`` is the whole search's budget here, so the per-step limits (the same
#: grammar as every other command's ``--timeout``) are ``--case-timeout``.
CASE_TIMEOUT_HELP = (
    "Per isolated step (--timeout is the whole search's budget here). "
    + TIMEOUT_HELP.replace("--timeout", "--case-timeout")
    + " Defaults: load 300, convert 900, predict 600."
)

BISECT_SOURCE = Option(
    "source", (), str, Any, None,
    "An .mlpackage (ML program), a saved torch program (.pt2, TorchScript .pt) or a "
    "torch model as path/to/file.py:factory.", show_default=False, api=False)
BISECT_TARGET = Option("target", ("--target", "-t"), str, str | None, None,
                       "Where the failure shows, e.g. sim:ane, coreml:ne.", show_default=False)
FINDING = Option(
    "finding", ("--finding",), str, str | None, None,
    "Failure group N of a run: FILE is its report.json (run --report) or the "
    "triggers.json of run --save-triggers; it gives the source, target, conversion "
    "path, inputs and converter fixes.", metavar="FILE#N", show_default=False)
BISECT_STAGE = Option(
    "stage", ("--stage",), str, str, "predict",
    "predict: reduce the ML program op by op (torch sources are converted first); "
    "convert: reduce the torch graph node by node, submodules first.")
GRAPH = Option(
    "graph", ("--graph",), str, str, "auto",
    "What to reduce: mil (the ML program's ops; default at --stage predict) or fx "
    "(the torch graph's nodes; always at --stage convert, optional at predict for torch "
    "sources — e.g. when the converter emitted different math).")
BISECT_INPUTS = Option(
    "inputs", ("--inputs",), Path, PathOption, None,
    "An .npz of named inputs. Without it (at --stage predict) run's discovery "
    "looks for a trigger on the target first (the example inputs, --length, then the "
    f"value families within --budget predictions). {INPUTS_LIMIT_HELP}")
BISECT_CONVERT = CONVERT.but(
    help="Torch conversion paths tried, in order: the first that converts is reduced.")
BISECT_BUDGET = Option("budget", ("--budget",), str, int | str | None, str(DEFAULT_BUDGET),
                       "Predictions spent looking for a trigger when no --inputs are given.",
                       metavar="N")
LENGTH = Option("length", ("--length",), int, int, 8,
                "Length of flexible dimensions for generated inputs.")
MAX_EVALS = Option("max_evals", ("--max-evals",), int, int | None, None,
                   "Stop after this many candidate evaluations.")
SEARCH_TIMEOUT = Option("timeout", ("--timeout",), float, float | None, None,
                        "Stop after this many seconds (best result so far).")
CASE_TIMEOUT = Option("case_timeout", ("--case-timeout",), list[str], Numbers, None,
                      CASE_TIMEOUT_HELP, metavar=TIMEOUT_METAVAR)
BISECT_FIX = Option("fix", ("--fix",), list[str], Many, None,
                    "Converter fix to convert a torch source with (repeatable), "
                    "e.g. converter-compat.")
OUT = Option("out", ("--out",), Path, str | os.PathLike[str], Path("nebisect-bisect"),
             "Output directory: new or empty, unless --force.")
BISECT_FORCE = FORCE.but(help="Write into a non-empty --out (files of the same names "
                         "are replaced; never the source or --inputs).")
BISECT_AS_JSON = AS_JSON.but(help="Print summary.json to stdout.")

BISECT = Command("bisect", (
    BISECT_SOURCE, BISECT_TARGET, FINDING, BISECT_STAGE, GRAPH, BISECT_INPUTS, BISECT_CONVERT,
    BISECT_BUDGET, LENGTH, MAX_EVALS, SEARCH_TIMEOUT, CASE_TIMEOUT, MEMORY, BISECT_FIX, CACHE,
    OUT, BISECT_FORCE, BISECT_AS_JSON, FUNCTION))

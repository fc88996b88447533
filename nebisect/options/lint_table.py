"""``nebisect lint``'s options (:mod:`nebisect.options.table`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nebisect.options.table import (
    CONVERT,
    CONVERTER_OVERRIDES,
    FORCE,
    FUNCTION,
    INPUT_RANGE,
    MEMORY,
    TIMEOUT,
    Command,
    Option,
)

LINT_SOURCE = Option(
    "source", (), str, Any, None,
    "An .mlpackage (ML program), a module:function returning a MIL Program, "
    "a saved torch program (.pt2, TorchScript .pt) or a torch model as "
    "path/to/file.py:factory (converted at fp16, as run converts it).", api=False)
OUTPUT_FORMAT = Option("output_format", ("--format", "-f"), str, str, "text",
                       "text | json | sarif (SARIF 2.1.0, for code scanning).", api=False)
LINT_FP16 = Option(
    "fp16", ("--fp16",), bool, bool, False,
    "Treat fp32 ops as fp16 too (the Neural Engine computes in fp16 whatever the "
    "program declares).")
LINT_INPUT_RANGE = INPUT_RANGE.but(
    help="Declared range of an input (repeatable), e.g. x=-15:15: enables the interval "
         "analysis that proves fp16 overflows.", metavar="NAME=LO:HI")
LINT_OUTPUT = Option("output", ("--output", "-o"), Path, Any, None,
                     "Write the json/sarif/text output to this file (new, unless --force).",
                     api=False)
LINT_FORCE = FORCE.but(api=False)
LIST_RULES = Option("list_rules", ("--list-rules",), bool, bool, False,
                    "List the rules and exit.", api=False)
LINT_CONVERT = CONVERT.but(
    help="A torch source's conversion paths: each program that converts is linted.")
LINT_CONVERTER_OVERRIDES = CONVERTER_OVERRIDES.but(
    help="Convert a torch source with nebisect's converter overrides (the "
         "converter-compat fix), as run --converter-overrides does.")
LINT_TIMEOUT = TIMEOUT.but(
    help=f"{TIMEOUT.help} lint uses load (a module:function builder is built and "
         "linted in an isolated child, a torch factory described in one) and convert.")

LINT = Command("lint", (
    LINT_SOURCE, OUTPUT_FORMAT, LINT_FP16, LINT_INPUT_RANGE, LINT_OUTPUT, LINT_FORCE, LIST_RULES,
    LINT_CONVERT, LINT_CONVERTER_OVERRIDES, LINT_TIMEOUT, MEMORY, FUNCTION))

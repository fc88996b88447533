"""``nebisect lint``'s options (:mod:`nebisect.options.table`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nebisect.isolation.timeouts import TIMEOUT_HELP, TIMEOUT_METAVAR
from nebisect.options.table import FUNCTION, MEMORY, Command, Many, Option

SOURCE = Option(
    "source", (), str, Any, None,
    "An .mlpackage (ML program), a module:function returning a MIL Program, "
    "a saved torch program (.pt2, TorchScript .pt) or a torch model as "
    "path/to/file.py:factory (converted at fp16, as run converts it).", api=False)
OUTPUT_FORMAT = Option("output_format", ("--format", "-f"), str, str, "text",
                       "text | json | sarif (SARIF 2.1.0, for code scanning).", api=False)
FP16 = Option(
    "fp16", ("--fp16",), bool, bool, False,
    "Treat fp32 ops as fp16 too (the Neural Engine computes in fp16 whatever the "
    "program declares).")
INPUT_RANGE = Option(
    "input_range", ("--input-range",), list[str], Many, None,
    "Declared range of an input (repeatable), e.g. x=-15:15: enables the interval "
    "analysis that proves fp16 overflows.", metavar="NAME=LO:HI")
OUTPUT = Option("output", ("--output", "-o"), Path, Any, None,
                "Write the json/sarif/text output to this file (new, unless --force).",
                api=False)
FORCE = Option("force", ("--force",), bool, bool, False, "Replace an existing --output.",
               api=False)
LIST_RULES = Option("list_rules", ("--list-rules",), bool, bool, False,
                    "List the rules and exit.", api=False)
CONVERT = Option(
    "convert", ("--convert",), str, str, "both",
    "A torch source's conversion paths: each program that converts is linted.",
    metavar="export|trace|both")
CONVERTER_OVERRIDES = Option(
    "converter_overrides", ("--converter-overrides",), bool, bool, False,
    "Convert a torch source with nebisect's converter overrides (the "
    "converter-compat fix), as run --converter-overrides does.")
TIMEOUT = Option(
    "timeout", ("--timeout",), list[str], Many, None,
    f"{TIMEOUT_HELP} lint uses load (a module:function builder is built and "
    "linted in an isolated child, a torch factory described in one) and convert.",
    metavar=TIMEOUT_METAVAR)

LINT = Command("lint", (
    SOURCE, OUTPUT_FORMAT, FP16, INPUT_RANGE, OUTPUT, FORCE, LIST_RULES, CONVERT,
    CONVERTER_OVERRIDES, TIMEOUT, MEMORY, FUNCTION))

"""``nebisect fix apply`` and ``fix verify``'s options (:mod:`nebisect.options.table`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nebisect.options.table import (
    AS_JSON,
    CASE_JOBS,
    CASE_TARGETS,
    CLUSTER,
    CORPUS_ROOT,
    FORCE,
    MEMORY,
    TIMEOUT,
    Command,
    Many,
    Option,
)

NAMES_AND_SOURCE = Option(
    "names_and_source", (), list[str], Any, ...,
    "Fix names, then an .mlpackage or a torch source file.py:factory.",
    metavar="NAME... SOURCE", api=False)
APPLY_OUTPUT = Option(
    "output", ("--output", "-o"), Path, str | os.PathLike[str], ...,
    "Where to write the .mlpackage: new, unless --force; never the source or inside it.")
APPLY_PRECISION = Option("precision", ("--precision",), str, str, "fp16",
                         "Conversion precision for torch sources: fp16 | fp32.")

APPLY = Command("fix apply", (
    NAMES_AND_SOURCE, APPLY_OUTPUT, FORCE, APPLY_PRECISION, TIMEOUT, MEMORY))

VERIFY_FIX = Option("fix", ("--fix",), list[str], Many, None,
                    "Fix to verify (repeat; default: all).")

VERIFY = Command("fix verify", (
    CORPUS_ROOT, VERIFY_FIX, CASE_TARGETS, CASE_JOBS, AS_JSON, TIMEOUT, MEMORY, CLUSTER))

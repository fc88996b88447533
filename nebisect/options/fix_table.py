"""``nebisect fix apply`` and ``fix verify``'s options (:mod:`nebisect.options.table`)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nebisect.options.table import CLUSTER, MEMORY, TIMEOUT, Command, Many, Option

NAMES_AND_SOURCE = Option(
    "names_and_source", (), list[str], Any, ...,
    "Fix names, then an .mlpackage or a torch source file.py:factory.",
    metavar="NAME... SOURCE", api=False)
OUTPUT = Option(
    "output", ("--output", "-o"), Path, str | os.PathLike[str], ...,
    "Where to write the .mlpackage: new, unless --force; never the source or inside it.")
FORCE = Option("force", ("--force",), bool, bool, False, "Replace an existing --output.")
PRECISION = Option("precision", ("--precision",), str, str, "fp16",
                   "Conversion precision for torch sources: fp16 | fp32.")

APPLY = Command("fix apply", (NAMES_AND_SOURCE, OUTPUT, FORCE, PRECISION, TIMEOUT, MEMORY))

ROOT = Option("root", (), Path, Any, ..., "Corpus directory.", api=False)
FIX = Option("fix", ("--fix",), list[str], Many, None, "Fix to verify (repeat; default: all).")
TARGET = Option("target", ("--target", "-t"), list[str], Many, None,
                "Only cases recorded for these targets (globs allowed).")
JOBS = Option("jobs", ("--jobs", "-j"), int, int, 1, "Cases verified in parallel.")
AS_JSON = Option("as_json", ("--json",), bool, bool, False, "Print the results as JSON.",
                 api=False)

VERIFY = Command("fix verify", (ROOT, FIX, TARGET, JOBS, AS_JSON, TIMEOUT, MEMORY, CLUSTER))

"""``nebisect replay``'s options (:mod:`nebisect.options.table`)."""

from __future__ import annotations

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
               NO_PICKLE,
               TIMEOUT,
               Command,
               Option,
)

JUNIT = Option("junit", ("--junit",), Path, Any, None,
               "Write JUnit XML here (a new file, unless --force).", api=False)
JUNIT_FORCE = FORCE.but(help="Replace an existing --junit file.", api=False)
UPDATE = Option("update", ("--update",), bool, bool, False,
                "Re-record every case whose expectation no longer holds.")
ALLOW_EMPTY = Option(
    "allow_empty", ("--allow-empty",), bool, bool, False,
    "Exit 0 when no case ran (an empty corpus, or every case skipped or filtered).")
DEVICES = Option(
    "devices", ("--devices",), str, Any, None,
    "With --cluster: run every case once per device (workers with the same "
    "facts, advertised as Dask resources) matching KEY=GLOB[,KEY=GLOB] (keys: family, "
    "chip, os, compute_units, coremltools, nebisect; 'all'), judged by the case's "
    "expectation for that chip family; prints a case × device matrix.", api=False)

REPLAY = Command("replay", (
    CORPUS_ROOT, CASE_TARGETS, CASE_JOBS, JUNIT, JUNIT_FORCE, AS_JSON, UPDATE, TIMEOUT, MEMORY,
    NO_PICKLE, ALLOW_EMPTY, CLUSTER, DEVICES))

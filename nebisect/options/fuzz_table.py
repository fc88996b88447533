"""``nebisect fuzz``'s options (:mod:`nebisect.options.table`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nebisect.options.table import (
    AS_JSON,
    CACHE,
    CLUSTER,
    CONVERT,
    FUNCTION,
    MEMORY,
    PLUGIN,
    REPORT,
    SEED,
    TIMEOUT,
    Command,
    Many,
    Option,
    PathOption,
)

FUZZ_SOURCE = Option(
    "source", (), str, Any, None,
    "A model to fuzz, as run takes it: an .mlpackage or path/to/file.py:factory "
    "(see nebisect run --help). Not with --op.", show_default=False, api=False)
OP = Option("op", ("--op",), list[str], Many, None,
            "MIL op to fuzz (repeatable or comma-separated), or 'all'.")
FUZZ_TARGET = Option("target", ("--target", "-t"), str, str | None, None,
                     "Target spec (default: coreml:ne on macOS, sim:ane elsewhere).")
FUZZ_BUDGET = Option(
    "budget", ("--budget", "-n"), int, int, 200,
    "Distinct cases to generate per op, or for SOURCE (at most; one prediction each).")
FUZZ_CONVERT = CONVERT.but(
    help="SOURCE only: the torch conversion paths fuzzed (each case runs on one).")
FUZZ_FAMILIES = Option(
    "families", ("--families",), str, str | None, "",
    "SOURCE only: draw from these value families (default: all; see "
    "nebisect run --list-families).", metavar="A,B")
FUZZ_FUNCTION = FUNCTION.but(help=f"SOURCE only. {FUNCTION.help}")
FUZZ_CACHE = CACHE.but(help=f"SOURCE only. {CACHE.help}")
FUZZ_SEED = SEED.but(help="Same seed (and --jobs), same findings.")
FUZZ_JOBS = Option(
    "jobs", ("--jobs", "-j"), int, int, 1,
    "Campaigns run in parallel; with more jobs than ops, each op's budget is split "
    "into seeded shards.")
WRAP = Option(
    "wrap", ("--wrap",), str, str, "none",
    "none | ne-attract (embed the op as conv → op → linear so a device routes "
    "it to the Neural Engine; the op's own output is judged).")
FUZZ_CORPUS = Option("corpus", ("--corpus",), Path, PathOption, None,
                     "Store every finding in this corpus.")
LIST_OPS = Option("list_ops", ("--list-ops",), bool, bool, False,
                  "List the fuzzable ops and exit.", api=False)
ISOLATION = Option(
    "isolation", ("--isolation",), str, str, "persistent",
    "persistent (fast; failures re-confirmed in a fresh process) | fork | spawn.")
SHRINK_BUDGET = Option(
    "shrink_budget", ("--shrink-budget",), int, int, 100,
    "Evaluations spent shrinking each finding (0: keep findings as found).")
FUZZ_TIMEOUT = TIMEOUT.but(help=f"{TIMEOUT.help} Defaults: load 300, predict 60.")
FUZZ_CLUSTER = CLUSTER.but(
    help=f"{CLUSTER.help} Each shard (an op's or the model's budget split by --jobs) is "
         "one unit; same --seed and --jobs, same findings as here.")

FUZZ = Command("fuzz", (
    FUZZ_SOURCE, OP, FUZZ_TARGET, FUZZ_BUDGET, FUZZ_CONVERT, FUZZ_CACHE, FUZZ_FAMILIES,
    FUZZ_FUNCTION, FUZZ_SEED, FUZZ_JOBS, WRAP, FUZZ_CORPUS, AS_JSON, REPORT, LIST_OPS, PLUGIN,
    ISOLATION, SHRINK_BUDGET, FUZZ_TIMEOUT, MEMORY, FUZZ_CLUSTER))

"""``nebisect fuzz``'s options (:mod:`nebisect.options.table`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nebisect.executors import CLUSTER_ENV, CLUSTER_HELP
from nebisect.isolation.timeouts import TIMEOUT_HELP, TIMEOUT_METAVAR
from nebisect.options.parsers import FUNCTION_HELP
from nebisect.options.table import MEMORY, PLUGIN, Command, Many, Option, PathOption

SOURCE = Option(
    "source", (), str, Any, None,
    "A model to fuzz, as run takes it: an .mlpackage or path/to/file.py:factory "
    "(see nebisect run --help). Not with --op.", show_default=False, api=False)
OP = Option("op", ("--op",), list[str], Many, None,
            "MIL op to fuzz (repeatable or comma-separated), or 'all'.")
TARGET = Option("target", ("--target", "-t"), str, str | None, None,
                "Target spec (default: coreml:ne on macOS, sim:ane elsewhere).")
BUDGET = Option(
    "budget", ("--budget", "-n"), int, int, 200,
    "Distinct cases to generate per op, or for SOURCE (at most; one prediction each).")
CONVERT = Option("convert", ("--convert",), str, str, "both",
                 "SOURCE only: the torch conversion paths fuzzed (each case runs on one).",
                 metavar="export|trace|both")
FAMILIES = Option(
    "families", ("--families",), str, str | None, "",
    "SOURCE only: draw from these value families (default: all; see "
    "nebisect run --list-families).", metavar="A,B")
FUNCTION = Option("function", ("--function",), str, str, "", f"SOURCE only. {FUNCTION_HELP}",
                  metavar="NAME")
SEED = Option("seed", ("--seed",), int, int, 0, "Same seed (and --jobs), same findings.")
JOBS = Option(
    "jobs", ("--jobs", "-j"), int, int, 1,
    "Campaigns run in parallel; with more jobs than ops, each op's budget is split "
    "into seeded shards.")
WRAP = Option(
    "wrap", ("--wrap",), str, str, "none",
    "none | ne-attract (embed the op as conv → op → linear so a device routes "
    "it to the Neural Engine; the op's own output is judged).")
CORPUS = Option("corpus", ("--corpus",), Path, PathOption, None,
                "Store every finding in this corpus.")
AS_JSON = Option("as_json", ("--json",), bool, bool, False, "Print the results as JSON.",
                 api=False)
REPORT = Option("report", ("--report",), Path, PathOption, None,
                "Write report.json/report.html here.")
LIST_OPS = Option("list_ops", ("--list-ops",), bool, bool, False,
                  "List the fuzzable ops and exit.", api=False)
ISOLATION = Option(
    "isolation", ("--isolation",), str, str, "persistent",
    "persistent (fast; failures re-confirmed in a fresh process) | fork | spawn.")
SHRINK_BUDGET = Option(
    "shrink_budget", ("--shrink-budget",), int, int, 100,
    "Evaluations spent shrinking each finding (0: keep findings as found).")
TIMEOUT = Option("timeout", ("--timeout",), list[str], Many, None,
                 f"{TIMEOUT_HELP} Defaults: load 300, predict 60.", metavar=TIMEOUT_METAVAR)
CLUSTER = Option(
    "cluster", ("--cluster",), str, str | None, None,
    f"{CLUSTER_HELP} Each shard (an op's or the model's budget split by --jobs) is "
    "one unit; same --seed and --jobs, same findings as here.", envvar=CLUSTER_ENV)

FUZZ = Command("fuzz", (
    SOURCE, OP, TARGET, BUDGET, CONVERT, FAMILIES, FUNCTION, SEED, JOBS, WRAP, CORPUS,
    AS_JSON, REPORT, LIST_OPS, PLUGIN, ISOLATION, SHRINK_BUDGET, TIMEOUT, MEMORY, CLUSTER))

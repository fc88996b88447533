"""``nebisect atlas``: sweep torch ops through coremltools, judged as ``run`` judges."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from nebisect.atlas.sweep import DEFAULT_SHRINK_BUDGET
from nebisect.bounds import MAX_JOBS, check_count, check_seed
from nebisect.errors import NebisectError
from nebisect.executors import CLUSTER_ENV, CLUSTER_HELP
from nebisect.options.generate import typer_default
from nebisect.options.table import FORCE
from nebisect.report.safe_text import markup, printable

if TYPE_CHECKING:
    from nebisect.atlas.records import Atlas, AtlasEntry
    from nebisect.atlas.sweep import Progress, SweepSettings

ORDER = 35

ATLAS_HELP = """\
The converter atlas: every sample of torch's own op database (OpInfo) for the ops
asked for becomes a one-op torch source, converted on both paths (torch.export,
jit.trace) and judged as run judges a model: the exact program (sim:fp64, where a
conversion bug shows), sim:fp32, sim:fp16 and sim:ane against torch in float64, at
the sample's values and at run's value families. Prints a table op × path ×
{converts, fp64, fp32, fp16, ane} with the first failing sample, and the distinct
failures (op × column: signature × paths; a column failing as the one before it
inherits that failure); --json has every sample with run's findings for it.

Each OpInfo sample is also judged moved along the axes converters get wrong and
OpInfo rarely takes: its dimensions counted from the end, a window's start counted from
the end, each boolean argument flipped, its rank-0 constants set to 1, its float input
holding -inf at every other element; an int32 sample is its own form, not a copy of the
float32 one. --json and --markdown say per op which axes were sampled.

The default op list (the ops behind published converter bugs and what models
convert through: 33 ops, 520 samples) takes about 12 minutes on 2 cores; --all
sweeps every op (587 ops; about an hour before the -inf and window-start moves).
Entries are cached by sample, settings and coremltools/torch/nebisect versions: a
re-run computes only what changed.
--keep DIR and --corpus DIR keep each distinct failure once: its first sample, shrunk
(an input's axis cut to 1 or halved while it fails the same way on the same paths,
--shrink-budget tries), judged again and written as DIR/NAME/model.py with its triggers,
the bisect / corpus add commands and a ready issue text, issue.md (--keep), or stored
as corpus cases replay guards (--corpus). Needs the 'atlas' extra (expecttest).

Patterns: --patterns N judges N generated torch programs instead of op samples, each
a chain of 1 to 4 idioms models are written in (in-place writes through slices, masked
and small-index gathers, shapes read off a flexible length, LSTMs with their state
carried, SDPA with grouped heads and masks, normalization variants, integer scalars,
fusable broadcasts, dtype arguments); program n of --seed S is the same in every
campaign. A converter bug shows in every program that uses its pattern: distinct
failures are told apart by signature and paths, and a kept one is shrunk by leaving
idioms out and making its input smaller. torch refusing a program on a path (not
exportable, not traceable: torch.export's or jit.trace's own error) is no converter
failure: coverage counts it apart, per idiom and per pair of idioms in sequence.

Across versions: save one sweep's --json, run the next under the other coremltools
(another environment) with --diff BEFORE.json; per op, failures fixed, regressed, new
(samples the earlier sweep did not judge) and unchanged. --load ATLAS.json reads a
saved sweep instead of sweeping (to render or diff two saved ones). A saved sweep is
read as untrusted text: its names and messages are printed with control characters
spelled out and written to --markdown with HTML escaped.

Exit code: 1 when a failure is found (with --diff: a failure regressed or new), 0
otherwise, 2 on bad input.
"""

OPS_OPTION = typer.Option(
    None, "--ops", metavar="A,B",
    help="Ops by their name in torch's op database (e.g. var,nn.functional.gelu,"
    "div.floor_rounding; --list-ops lists them). Default: the curated list.")
ALL_OPTION = typer.Option(False, "--all", help="Every op of the database (hours on 2 cores).")
PATTERNS_OPTION = typer.Option(
    None, "--patterns", metavar="N",
    help="Judge N generated pattern programs (chains of the idioms models are written in) "
    "instead of op samples; --seed picks the campaign.")
DTYPES_OPTION = typer.Option(
    "float32,int32", "--dtypes", metavar="A,B",
    help="Sample dtypes, of float32, int32, int64, bool (each op at those it supports).")
BUDGET_OPTION = typer.Option(
    8, "--budget", metavar="N",
    help="Value-family predictions per target and sample, beyond the sample's own values.")
SEED_OPTION = typer.Option(0, "--seed", help="Seed of the value families: same seed, same atlas.")
JOBS_OPTION = typer.Option(
    None, "--jobs", "-j", help="Samples judged side by side (default: the cores).")
JSON_OPTION = typer.Option(False, "--json", help="Print the atlas as JSON (schema nebisect.atlas).")
MARKDOWN_OPTION = typer.Option(
    None, "--markdown", metavar="FILE",
    help="Write the Markdown summary (to paste into an issue): a new file, unless --force.")
REPORT_OPTION = typer.Option(
    None, "--report", help="Write report.json/report.html here (new files, unless --force).")
FORCE_OPTION = typer_default(FORCE.but(help="Replace an existing --markdown file or "
                                       "--report's files."))
KEEP_OPTION = typer.Option(
    None, "--keep", metavar="DIR",
    help="Write each distinct failure's shrunk sample, its triggers, next commands and "
    "issue text (issue.md) under DIR.")
CORPUS_OPTION = typer.Option(
    None, "--corpus", metavar="DIR",
    help="Store each distinct failure's shrunk sample as corpus cases (the one-op source, "
    "its trigger inputs, target and conversion path) that replay guards.")
SHRINK_OPTION = typer.Option(
    DEFAULT_SHRINK_BUDGET, "--shrink-budget", metavar="N",
    help="Smaller samples tried per kept failure (0: keep the sample as OpInfo gives it).")
CACHE_OPTION = typer.Option(
    None, "--cache", metavar="DIR",
    help="Entry cache (default: $XDG_CACHE_HOME/nebisect/atlas or ~/.cache/nebisect/atlas).")
NO_CACHE_OPTION = typer.Option(False, "--no-cache", help="Judge every sample afresh.")
OVERRIDES_OPTION = typer.Option(
    False, "--converter-overrides",
    help="Convert with nebisect's converter overrides, as run --converter-overrides does.")
SETUP_OPTION = typer.Option(
    None, "--converter-setup", metavar="MODULE:FUNCTION",
    help="Call this before converting, in the conversion process (repeatable): your own "
    "@register_torch_op converters, swept as the atlas sweeps coremltools' own.")
CLUSTER_OPTION = typer.Option(
    None, "--cluster", envvar=CLUSTER_ENV,
    help=f"{CLUSTER_HELP} Each sample's cells go to the workers, as run --cluster sends them.")
DIFF_OPTION = typer.Option(
    None, "--diff", metavar="BEFORE.json",
    help="Compare with an earlier sweep's --json (another coremltools or torch).")
LOAD_OPTION = typer.Option(
    None, "--load", metavar="ATLAS.json", help="Read a saved sweep instead of sweeping.")
LIST_OPS_OPTION = typer.Option(False, "--list-ops", help="List the database's ops and exit.")


def atlas(
    ops: str = OPS_OPTION,
    every: bool = ALL_OPTION,
    patterns: int = PATTERNS_OPTION,
    dtypes: str = DTYPES_OPTION,
    budget: int = BUDGET_OPTION,
    seed: int = SEED_OPTION,
    jobs: int = JOBS_OPTION,
    as_json: bool = JSON_OPTION,
    markdown_file: Path = MARKDOWN_OPTION,
    report: Path = REPORT_OPTION,
    force: bool = FORCE_OPTION,
    keep: Path = KEEP_OPTION,
    corpus: Path = CORPUS_OPTION,
    shrink_budget: int = SHRINK_OPTION,
    cache: Path = CACHE_OPTION,
    no_cache: bool = NO_CACHE_OPTION,
    converter_overrides: bool = OVERRIDES_OPTION,
    converter_setup: list[str] = SETUP_OPTION,
    cluster: str = CLUSTER_OPTION,
    diff_with: Path = DIFF_OPTION,
    load: Path = LOAD_OPTION,
    list_ops: bool = LIST_OPS_OPTION,
) -> None:
    """``nebisect atlas`` (its help is :data:`ATLAS_HELP`)."""
    from nebisect.atlas.plan import MAX_PATTERNS, op_names, parse_dtypes, pattern_plan, plan
    from nebisect.atlas.sweep import EntryCache, sweep
    from nebisect.executors.runner import Runner

    if list_ops:
        typer.echo("\n".join(op_names()))
        return
    _check_outputs(markdown_file, report, force,
                   [(option, path) for option, path in (("--load", load), ("--diff", diff_with))
                    if path is not None])
    before = _read_atlas(diff_with, "--diff") if diff_with is not None else None
    if load is not None:
        result = _read_atlas(load, "--load")
        _write(result, as_json, markdown_file, report)
        raise typer.Exit(_finish(result, before))
    if sum((ops is not None, every, patterns is not None)) > 1:
        raise NebisectError("--ops, --all and --patterns: choose one")
    settings = _settings(budget, seed, converter_overrides, tuple(converter_setup or ()), keep,
                         corpus, shrink_budget, patterns is not None)
    entries = None if no_cache else EntryCache(_cache_directory(cache), settings)
    planned = (pattern_plan(check_count("--patterns", patterns, MAX_PATTERNS), seed)
               if patterns is not None else plan(_op_names(ops), parse_dtypes(dtypes),
                                                 every=every))
    if not planned.samples:
        raise NebisectError("no sample to judge: " + "; ".join(
            reasons[0] for reasons in planned.unsampled.values()))
    workers = check_count("--jobs", jobs, MAX_JOBS) if jobs is not None else os.cpu_count() or 1
    rows = len({s.op_name for s in planned.samples})
    _say(f"atlas: {len(planned.samples)} pattern programs" if patterns is not None else
         f"atlas: {len(planned.samples)} samples of {rows} ops")
    with Runner(workers, cluster=cluster) as runner:
        result = sweep(planned.samples, settings, runner, entries,
                       unsampled=planned.unsampled, covered=planned.covered,
                       progress=_progress(len(planned.samples)),
                       told=_say)
    _write(result, as_json, markdown_file, report)
    raise typer.Exit(_finish(result, before))


def _op_names(ops: str | None) -> list[str] | None:
    """``--ops A,B`` → the names (None: the default list)."""
    if ops is None:
        return None
    names = [name.strip() for name in ops.split(",") if name.strip()]
    if not names:
        raise NebisectError("--ops '': name at least one op")
    return names


def _settings(budget: int, seed: int, converter_overrides: bool,
              converter_setup: tuple[str, ...], keep: Path | None, corpus: Path | None,
              shrink_budget: int, patterns: bool) -> SweepSettings:
    """The sweep's settings from its options, checked."""
    from nebisect.atlas.sweep import SweepSettings
    from nebisect.isolation.timeouts import DEFAULT_TIMEOUTS
    from nebisect.sources.converter_setup import check_converter_setup

    check_count("--budget", budget)
    check_count("--shrink-budget", shrink_budget, least=0)
    check_seed(f"--seed {seed}", seed)
    if corpus is not None and (converter_setup or converter_overrides):
        raise NebisectError("--corpus converts plainly on replay: it cannot keep what "
                            "--converter-setup or --converter-overrides changed")
    check_converter_setup(converter_setup, timeout=DEFAULT_TIMEOUTS.load)
    return SweepSettings(budget=budget, seed=seed, converter_overrides=converter_overrides,
                         converter_setup=converter_setup, keep=keep, corpus=corpus,
                         shrink_budget=shrink_budget, patterns=patterns)


def _check_outputs(markdown_file: Path | None, report: Path | None, force: bool,
                   inputs: list[tuple[str, Path]]) -> None:
    """The output files, checked before any work: none is one of the saved sweeps read
    (``inputs``) or holds one, and none that exists is replaced without ``force``."""
    from nebisect.report import REPORT_FILE_NAMES
    from nebisect.report.outputs import apart_from_inputs, output_directory, output_file

    if markdown_file is not None:
        output_file(markdown_file, "--markdown", force=force, inputs=inputs)
    if report is not None:
        apart_from_inputs(report, "--report", inputs, holding=True)
        for name in REPORT_FILE_NAMES:
            output_file(output_directory(report, "--report") / name, "--report", force=force,
                        inputs=inputs)


def _cache_directory(cache: Path | None) -> Path:
    """The entry cache's directory, created now: one that cannot be is a one-line error
    before the sweep, not after it."""
    from nebisect.report.outputs import output_directory

    return output_directory(cache or _default_cache(), "--cache")


def _read_atlas(path: Path, option: str) -> Atlas:
    """A saved sweep's ``--json`` (read by :func:`nebisect.files.read_json`: bounded);
    a file that is not one is a one-line error."""
    from nebisect.atlas.records import Atlas
    from nebisect.files import read_json

    try:
        document = read_json(path)
    except NebisectError as error:
        raise NebisectError(f"{option} {error}") from None
    try:
        return Atlas.from_dict(document)
    except NebisectError as error:  # CodecError: not an atlas
        raise NebisectError(f"{option} {path}: not a nebisect atlas ({error})") from None


def _finish(result: Atlas, before: Atlas | None) -> int:
    """The exit code, after the diff with ``before`` is printed (to stderr when stdout
    carries the JSON): a failure, or with a diff one regressed or new."""
    if before is None:
        return 1 if result.failed else 0
    from nebisect.atlas.diff import CHANGES, diff, diff_rows, versions

    changes = diff(before, result)
    _say(f"atlas diff: {versions(before, result)}")
    _say(f"  {'op':28} " + " ".join(f"{name:>9}" for name in CHANGES))
    for op, *counts in diff_rows(changes):
        _say(f"  {op:28} " + " ".join(f"{count:>9}" for count in counts))
    for change in changes:
        for name in ("fixed", "regressed", "new"):
            for index, call, path, failure in change.changes[name]:
                _say(f"  {name}: {change.op} {index} [{path}] {failure}: {call}")
    return 1 if any(c.changes["regressed"] or c.changes["new"] for c in changes) else 0


def _default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "nebisect" / "atlas"


def _say(text: str) -> None:
    """A line on stderr; names and messages from a saved sweep are untrusted text, its
    control characters are spelled out (:func:`~nebisect.report.safe_text.printable`)."""
    print(printable(text), file=sys.stderr, flush=True)


def _progress(total: int) -> Progress:
    """A line per sample on stderr (a terminal and a CI log alike): what it found,
    whether it came from the cache and the samples judged per second."""
    import time

    start = time.monotonic()
    computed = [0]

    def show(done: int, _total: int, entry: AtlasEntry, cached: bool) -> None:
        if not cached:
            computed[0] += 1
        elapsed = time.monotonic() - start
        rate = computed[0] / elapsed if elapsed > 0 and computed[0] else 0.0
        what = ("cached" if cached else f"{entry.seconds:.1f}s")
        # a failing cell is a failure whether run made it a finding or a margin
        found = (f"skipped: {entry.skipped[:80]}" if entry.skipped
                 else f"{len(entry.findings)} finding(s)" if entry.findings
                 else f"{len(entry.failures())} failure(s)" if entry.failed else "pass")
        _say(f"[{done}/{total}] {entry.op} {entry.index} ({what}, {rate:.2f} samples/s): {found}")

    return show


def _write(result: Atlas, as_json: bool, markdown_file: Path | None,
           report: Path | None) -> None:
    from nebisect.atlas.render import (
        IDIOM_COLUMNS,
        TABLE_COLUMNS,
        failure_rows,
        idiom_rows,
        markdown,
        op_rows,
        pair_rows,
        payload,
    )
    from nebisect.files import write_text

    if markdown_file is not None:
        write_text(markdown_file, markdown(result))
    if report is not None:
        from nebisect.report import write_report

        write_report(report, "atlas", payload(result))
    if as_json:
        from nebisect.report import to_jsonable

        typer.echo(json.dumps(to_jsonable(result.to_dict()), indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False, emoji=False)
    if result.of_patterns:  # a row per program would bury what the idioms reached
        table = Table(title="nebisect atlas: pattern programs by idiom (--markdown/--json: "
                      "every program)")
        columns, rows = list(IDIOM_COLUMNS), idiom_rows(result)
    else:
        table = Table(title="nebisect atlas (first failing sample per cell; --markdown/--json: "
                      "all)")
        columns = list(TABLE_COLUMNS[:TERMINAL_COLUMNS])
        rows = [[_short(cell) for cell in row[:TERMINAL_COLUMNS]] for row in op_rows(result)]
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(markup(cell) for cell in row))
    console.print(table)
    if result.of_patterns:
        pairs = pair_rows(result)
        console.print(f"{len(pairs)} idiom pairs reached, "
                      f"{sum(row[4] != '0' for row in pairs)} of them in a failing program "
                      "(--markdown: the pairs' table)", markup=False)
    failures = failure_rows(result)
    console.print(f"{len(result.entries)} samples ({result.computed} judged, "
                  f"{len(result.entries) - result.computed} cached) in {result.seconds:.0f} s; "
                  f"{len(failures)} distinct failures", markup=False)
    for op, failure, paths, count, index, call in failures:
        console.print(printable(f"  {op}: {failure} [{paths}] in {count} sample(s), "
                                f"first {index}: {call}"), markup=False)


#: the table's columns a terminal shows (op, path, the verdict columns, samples)
TERMINAL_COLUMNS = 8


def _short(cell: str) -> str:
    """A terminal cell: the verdict's class (``mismatch:tolerance``), its sample index,
    no message (the JSON and Markdown have it)."""
    verdict, _, index = cell.partition(" (")
    if verdict.startswith("error:"):
        verdict = ":".join(verdict.split(":")[:2])
    return f"{verdict} ({index}" if index else verdict


def register(app: typer.Typer) -> None:
    app.command("atlas", help=ATLAS_HELP)(atlas)

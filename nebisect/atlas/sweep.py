"""Sweep torch ops through coremltools: every sample judged as ``run`` judges a model.

Each :class:`~nebisect.atlas.samples.Sample` is written as a one-op torch source and
run by :func:`nebisect.detect.source_run.run_source_on` on one
:class:`~nebisect.executors.runner.Runner` for the whole sweep (its warm conversion
template serves every sample): both conversion paths, the exact program (``sim:fp64``,
the ``conversion`` attribution), ``sim:fp32``, ``sim:fp16`` and ``sim:ane`` against
torch in float64, at the sample's own values and at ``run``'s value families (special
values, large magnitudes, zeros, negatives, exact integers, tiny values) within
``budget`` predictions per target. What the run reports is read down to an
:class:`~nebisect.atlas.records.AtlasEntry`.

Entries are cached by (sample source, settings, coremltools, torch and nebisect
versions): a re-run computes only what changed. A cache file is trusted only when it
reads back (:func:`nebisect.files.read_json`: bounded), names its own key and holds an
entry of its sample in the shape a sweep writes; any other is computed again and
rewritten. A skipped sample is not cached: its reason may be the machine's (a process
that could not start), not the sample's.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from nebisect.atlas.records import (
    ATLAS_COLUMNS,
    ERROR_PREFIX,
    NOT_RUN,
    PATTERNS,
    SAMPLES_SETTING,
    Atlas,
    AtlasEntry,
    AtlasFinding,
)
from nebisect.atlas.samples import Sample
from nebisect.atlas.store import keep, store
from nebisect.errors import NebisectError
from nebisect.files import MAX_JSON_CHARS, read_json, write_text
from nebisect.targets.spec import REFERENCE_SPEC, TargetSpec
from nebisect.verdict import normalize_message

if TYPE_CHECKING:
    from nebisect.detect.matrix import RunReport
    from nebisect.detect.source_run import RunOutcome
    from nebisect.executors.runner import Runner

#: the targets every sample is judged on (``sim:fp64`` is run's exact row, added by run)
SWEEP_TARGETS = tuple(t for t in ATLAS_COLUMNS.values() if t is not None and t != REFERENCE_SPEC)
#: exploration predictions per target and sample: every value family at least once
SAMPLE_BUDGET = 8
#: smaller samples tried per kept failure (each a judging: seconds)
DEFAULT_SHRINK_BUDGET = 6


@dataclass(frozen=True)
class SweepSettings:
    """What a sweep judges with; part of every cache key. ``converter_setup``: the
    ``module:function`` calls made before converting (one's own op converters, or a
    broken one a test plants); ``keep``: where each failing sample's source and
    triggers go, ``corpus``: the corpus its findings are stored in (None: nowhere;
    :mod:`nebisect.atlas.store`); ``shrink_budget``: the smaller samples tried per
    kept failure; ``patterns``: the samples are generated pattern programs, whose
    failures are told apart across programs (:meth:`Atlas.distinct_failures
    <nebisect.atlas.records.Atlas.distinct_failures>`)."""

    budget: int = SAMPLE_BUDGET
    seed: int = 0
    converter_overrides: bool = False
    converter_setup: tuple[str, ...] = ()
    keep: Path | None = field(default=None, compare=False)
    corpus: Path | None = field(default=None, compare=False)
    shrink_budget: int = field(default=DEFAULT_SHRINK_BUDGET, compare=False)
    patterns: bool = False

    @property
    def keeps(self) -> bool:
        """Whether failures are kept (``keep``, ``corpus``)."""
        return self.keep is not None or self.corpus is not None

    def describe(self) -> dict[str, str]:
        described = {"budget": str(self.budget), "seed": str(self.seed),
                     "converter_overrides": str(self.converter_overrides).lower(),
                     "converter_setup": ",".join(self.converter_setup),
                     "targets": ",".join(map(str, SWEEP_TARGETS))}
        return {**described, SAMPLES_SETTING: PATTERNS} if self.patterns else described


def environment() -> dict[str, str]:
    """The versions an entry depends on beyond its sample (and an atlas is diffed by)."""
    from importlib.metadata import version

    return {name: version(name) for name in ("coremltools", "torch", "nebisect")}


class EntryCache:
    """Entries by key, one JSON file each under ``directory`` (written atomically): the
    key and the entry (``{"key": …, "entry": …}``)."""

    def __init__(self, directory: Path, settings: SweepSettings) -> None:
        self.directory = directory
        self._salt = json.dumps([settings.describe(), environment()], sort_keys=True)

    def key(self, sample: Sample) -> str:
        return hashlib.sha256(f"{self._salt}\n{sample.digest()}".encode()).hexdigest()

    def get(self, sample: Sample) -> AtlasEntry | None:
        """``sample``'s cached entry; None when there is none to trust (see the module
        docstring)."""
        key = self.key(sample)
        try:
            document = read_json(self.directory / f"{key}.json", MAX_JSON_CHARS,
                                 follow_symlinks=False)
            if not isinstance(document, dict) or document.get("key") != key:
                return None
            entry = AtlasEntry.from_dict(document.get("entry"))
        except NebisectError:  # unreadable, or not an entry (CodecError)
            return None
        return entry if _is_entry_of(entry, sample) else None

    def put(self, sample: Sample, entry: AtlasEntry) -> None:
        key = self.key(sample)
        write_text(self.directory / f"{key}.json",
                   json.dumps({"key": key, "entry": entry.to_dict()}, sort_keys=True))


def _is_entry_of(entry: AtlasEntry, sample: Sample) -> bool:
    """Whether ``entry`` is one :func:`judge` could have made of ``sample`` and
    :func:`sweep` cached: the sample's identity, judged (not skipped), every path's
    row with every column."""
    return ((entry.op, entry.index, entry.call, entry.digest)
            == (sample.op_name, sample.index, sample.call, sample.digest())
            and not entry.skipped and entry.seconds >= 0 and entry.conversions >= 0
            and all(path and set(row) == set(ATLAS_COLUMNS) for path, row in entry.cells.items()))


Progress = Callable[[int, int, AtlasEntry, bool], None]


def sweep(samples: Sequence[Sample], settings: SweepSettings, runner: Runner,
          cache: EntryCache | None = None, *, unsampled: dict[str, list[str]] | None = None,
          covered: dict[str, list[str]] | None = None,
          progress: Progress = lambda _done, _total, _entry, _cached: None,
          told: Callable[[str], None] = lambda _line: None) -> Atlas:
    """Judge every sample (or read it from ``cache``); the atlas lists them in sample
    order. ``progress`` is told after each (done, total, entry, whether it came from the
    cache). On this machine the runner's isolators judge one sample each at a time
    (:func:`judge_all`); with a cluster, samples go one by one and their cells to the
    cluster. When failures are kept (:attr:`SweepSettings.keeps`), each distinct failure
    is then shrunk and kept (:func:`keep_failures`; ``told`` hears a line per failure)."""
    atlas = Atlas(environment(), settings.describe(), unsampled=dict(unsampled or {}),
                  covered=dict(covered or {}))
    start = time.monotonic()
    entries: dict[int, AtlasEntry] = {}
    lock = threading.Lock()

    def record(index: int, entry: AtlasEntry, cached: bool) -> None:
        with lock:
            entries[index] = entry
            progress(len(entries), len(samples), entry, cached)

    with tempfile.TemporaryDirectory(prefix="nebisect-atlas-") as scratch:
        todo = []
        for index, sample in enumerate(samples):
            entry = cache.get(sample) if cache else None
            if entry is None:
                todo.append(index)
            else:
                record(index, entry, True)

        def judged(index: int, here: Runner) -> None:
            entry = judge(samples[index], settings, here, Path(scratch))[0]
            if cache and not entry.skipped:
                cache.put(samples[index], entry)
            record(index, entry, False)

        judge_all(todo, judged, runner)
        atlas.computed = len(todo)
        atlas.entries = [entries[index] for index in range(len(samples))]
        if settings.keeps:
            keep_failures(atlas, samples, settings, runner, Path(scratch), told)
    atlas.seconds = time.monotonic() - start
    return atlas


def judge_all(items: list[int], judged: Callable[[int, Runner], None], runner: Runner) -> None:
    """``judged(item, runner)`` for every item: on a cluster one after the other, on the
    command's runner (the cluster judges a sample's cells in parallel); here on up to
    ``runner.jobs`` threads, each on a runner of one of its isolators. A one-op
    sample's run has few cells, most of them waiting on the one before (the
    conversion, then the reference), so judging samples side by side keeps the cores
    busier than spreading one sample's cells."""
    if not items:
        return
    if runner.remote or runner.jobs == 1:
        for item in items:
            judged(item, runner)
        return
    from nebisect.executors.runner import Runner

    runner.map(items, lambda item, isolator: judged(item, Runner(isolator=isolator)))


def judge(sample: Sample, settings: SweepSettings, runner: Runner,
          scratch: Path) -> tuple[AtlasEntry, RunOutcome | None]:
    """One sample through ``run`` on ``runner``, in a directory of its own under
    ``scratch``: its entry (``skipped`` when the run cannot judge it: the op fails in
    torch, nothing converts to run) and the run's outcome (None when skipped)."""
    from nebisect.detect.source_run import RunOptions, run_source_on
    from nebisect.executors.invocation import Invocation

    here = scratch / f"{sample.name}-{next(_judged)}"
    here.mkdir()
    source = here / "model.py"
    source.write_text(sample.source_text())
    entry = AtlasEntry(sample.op_name, sample.index, sample.call, sample.digest())
    start = time.monotonic()
    options = RunOptions(source=f"{source}:model", invocation=Invocation(SWEEP_TARGETS),
                         budget=settings.budget,
                         seed=settings.seed, converter_overrides=settings.converter_overrides,
                         converter_setup=settings.converter_setup,
                         # an entry says what the converter does at the sweep's settings
                         strict_conversion=True)
    outcome = None
    try:
        outcome = run_source_on(runner, options, here)
    except NebisectError as error:
        entry.skipped = str(error)
    else:
        entry.cells = cells_of(outcome.report)
        entry.conversions = sum(len(v.conversion.attempts) for v in
                                outcome.report.conversions.values() if v.conversion)
        entry.findings = findings_of(outcome.report)
    entry.seconds = round(time.monotonic() - start, 3)
    return entry, outcome


#: numbers the directories of a sweep's judgings (a sample may be judged again)
_judged = itertools.count(1)


def keep_failures(atlas: Atlas, samples: Sequence[Sample], settings: SweepSettings,
                  runner: Runner, scratch: Path, told: Callable[[str], None]) -> None:
    """Each distinct failure (:meth:`Atlas.distinct_failures`) once: the first sample
    that shows it, shrunk while it still fails the same way on the same paths
    (:func:`shrink`, within ``settings.shrink_budget`` judgings), judged again and
    kept (:mod:`nebisect.atlas.store`: ``--keep``, ``--corpus``)."""
    by_identity = {(s.op_name, s.index, s.call): s for s in samples}
    kept: set[str] = set()
    for (op, failure, paths), entries in atlas.distinct_failures().items():
        first = by_identity[(op, entries[0].index, entries[0].call)]

        def still_fails(candidate: Sample, failure: str = failure,
                        paths: tuple[str, ...] = paths) -> bool:
            entry, _ = judge(candidate, settings, runner, scratch)
            return entry.failures().get(failure) == list(paths)

        sample = shrink(first, still_fails, settings.shrink_budget)
        if sample.digest() in kept:
            continue
        kept.add(sample.digest())
        entry, outcome = judge(sample, settings, runner, scratch)
        if outcome is None or entry.failures().get(failure) != list(paths):
            told(f"  {op} {failure} [{' '.join(paths)}]: not reproduced when judged again; "
                 "not kept")
            continue
        where = []
        if settings.keep is not None:
            where.append(str(keep(sample, outcome, settings.keep)))
        if settings.corpus is not None:
            source = Path(outcome.report.source.rpartition(":")[0])
            where.extend(store(sample, outcome, source, settings.corpus))
        told(f"  kept {op} {failure} [{' '.join(paths)}] as {sample.index} "
             f"({sample.shapes}): {', '.join(where)}")


def shrink(sample: Sample, still_fails: Callable[[Sample], bool], budget: int) -> Sample:
    """The smallest sample :meth:`~nebisect.atlas.samples.Sample.smaller` reaches from
    ``sample`` that ``still_fails``, greedily (the first smaller candidate that fails is
    taken, and shrunk again), trying at most ``budget`` candidates."""
    tried = 0
    while tried < budget:
        for candidate in sample.smaller():
            if tried >= budget:
                break
            tried += 1
            if still_fails(candidate):
                sample = candidate
                break
        else:
            break
    return sample


def cells_of(report: RunReport) -> dict[str, dict[str, str]]:
    """Per conversion path: ``converts`` (``ok`` or the conversion's error) and each
    target column's verdict — the first failing signature of its rows, else ``pass``
    (``skipped`` when every row skipped; :data:`NOT_RUN` when the path did not
    convert)."""
    converted = _conversions(report)
    cells: dict[str, dict[str, str]] = {}
    for path, outcome in converted.items():
        row = cells[path] = {"converts": outcome}
        for column, target in ATLAS_COLUMNS.items():
            if target is not None:
                row[column] = _column(report, target, path) if outcome == "ok" else NOT_RUN
    return cells


def _conversions(report: RunReport) -> dict[str, str]:
    """Path → ``ok`` or ``error: <message>`` of its first failed attempt, over every
    precision; the message normalized as error signatures are (numbers, names and
    paths masked), so one converter error over many samples is one failure."""
    found: dict[str, str] = {}
    for verdict in report.conversions.values():
        attempts = verdict.conversion.attempts if verdict.conversion else []
        for attempt in attempts:
            path, status = str(attempt.get("path", "")), attempt.get("status")
            if found.get(path, "ok") == "ok":
                found[path] = "ok" if status == "ok" else (
                    ERROR_PREFIX + normalize_message(str(attempt.get("message", ""))))
    return found


def _column(report: RunReport, target: TargetSpec, path: str) -> str:
    rows = [r for r in report.rows if r.role == "target" and r.target == str(target)
            and r.path == path]
    failing = [r for r in rows if r.verdict.failed]
    if failing:
        return failing[0].verdict.signature
    if rows and all(r.verdict.status == "skipped" for r in rows):
        return "skipped"
    return "pass" if rows else NOT_RUN


def findings_of(report: RunReport) -> list[AtlasFinding]:
    """``run``'s findings of the sample, one per root cause."""
    return [AtlasFinding(f.title, f.symptom, f.attribution, f.op_type, f.paths, f.targets,
                         f.message) for f in report.findings]

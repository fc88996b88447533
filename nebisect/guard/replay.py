"""Replay: run every corpus case in isolation and hold it to its recorded expectation.

Outcomes per case:

* ``ok`` — a ``pass``/``fixed`` case passes, or a ``failing`` case fails with exactly its
  recorded signature (the known bug is still there, and still the same bug);
* ``regression`` — a ``pass``/``fixed`` case fails, or a ``failing`` case fails with a
  different signature (the bug changed: a new failure hides behind the old one);
* ``improved`` — a ``failing`` case passes; not a regression, but the record is stale
  (``--update`` re-records it as ``fixed``);
* ``skipped`` — the case's target is unavailable here (Core ML off macOS, a plugin
  target whose module is missing) or was not selected; the reason is kept.

Every case runs from a private copy of exactly its listed files
(:meth:`~nebisect.corpus.store.CorpusCase.private_copy`); a case that no longer verifies
at that moment is a regression with the reason, never run.

Torch cases are converted first (in isolation, at the target's precision, on the
conversion path their ``convert_path`` option names — a bug may live on one path only —
else the first that converts) and then evaluated against torch fp64; ``.mlpackage``
cases go straight to :func:`nebisect.evaluate.judge.evaluate`. Each case is one
``replay`` unit handed to an executor (:mod:`nebisect.executors`): by default ``jobs``
threads here, each owning its own :class:`~nebisect.isolate.Isolator` (an interruption
cancels the cases in flight at once), or the workers of a Dask cluster. The unit carries
the scanned record and the case's files; the verdict comes back as JSON and is judged
here, so a case judges the same whichever executor ran it. A unit that ended without a
verdict (its workers died twice) is an ``error`` with :data:`LOST_SIGNATURE`; a verdict
that took more than one attempt lists them in the verdict's ``process.worker_attempts``.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from nebisect.case import PACKAGE, Case, SourceRef
from nebisect.codec import Form, Record, encode
from nebisect.corpus.record import CASE_FILE, CaseRecord, CorruptCaseError, Expected
from nebisect.corpus.store import Corpus, CorpusCase
from nebisect.errors import NebisectError
from nebisect.evaluate.judge import evaluate
from nebisect.executors import Unit, UnitResult
from nebisect.executors.local import LOCAL
from nebisect.executors.runner import Runner, using
from nebisect.executors.units import LOST_SIGNATURE
from nebisect.fixes.apply import FixedSource, fix_source
from nebisect.fixes.base import Fix
from nebisect.isolate import Isolator
from nebisect.isolation.timeouts import DEFAULT_TIMEOUTS, Timeouts
from nebisect.targets.registry import get_target, spec_of
from nebisect.verdict import Stage, Status, Verdict

OUTCOMES = ("ok", "regression", "improved", "skipped")
DAMAGED_SIGNATURE = "error:load:damaged corpus case"


@dataclass
class CaseRun:
    """One evaluation of a corpus case, and the artifact preparation behind it."""

    verdict: Verdict
    prepared: FixedSource | None = None


@dataclass
class ReplayResult(Record):
    """A case's verdict held against its expectation; its JSON names a device only for
    a device's replay."""

    json_form: ClassVar[Form] = Form(omit_defaults=("device",), order=(
        "case_id", "label", "target", "expected", "outcome", "reason", "selected"))

    case_id: str
    label: str
    target: str
    expected: Expected
    verdict: Verdict
    outcome: str
    reason: str
    selected: bool = True
    device: dict[str, str] = field(default_factory=dict)

    def junit_verdict(self) -> Verdict:
        """The verdict CI should see: a known bug reproducing as recorded is a pass."""
        if self.outcome in ("ok", "improved"):
            return Verdict(Status.PASS, self.verdict.stage, message=self.reason,
                           timings=self.verdict.timings, target=self.target)
        if self.outcome == "skipped":
            return Verdict(Status.SKIPPED, self.verdict.stage, message=self.reason,
                           target=self.target)
        failed = Verdict.from_dict(self.verdict.to_dict())
        failed.message = f"{self.reason}\n{self.verdict.message}".strip()
        return failed


@dataclass
class ReplaySummary:
    results: list[ReplayResult] = field(default_factory=list)

    def count(self, outcome: str) -> int:
        return sum(r.outcome == outcome for r in self.results)

    @property
    def regressions(self) -> list[ReplayResult]:
        return [r for r in self.results if r.outcome == "regression"]

    @property
    def replayed(self) -> int:
        """Cases that actually ran (not skipped): zero means the guard guarded nothing."""
        return len(self.results) - self.count("skipped")


def judge(expected: Expected, verdict: Verdict) -> tuple[str, str]:
    """Outcome and a one-line reason for ``verdict`` against ``expected``."""
    if verdict.status == "skipped":
        return "skipped", verdict.message or "skipped"
    if expected.status in ("pass", "fixed"):
        if not verdict.failed:
            return "ok", f"passes ({expected.status})"
        return "regression", f"expected {expected.status}, now fails: {verdict.signature}"
    if not verdict.failed:
        return "improved", (f"no longer fails (recorded {expected.signature}); "
                            "re-record with --update")
    if verdict.signature == expected.signature:
        return "ok", f"still fails as recorded: {verdict.signature}"
    return "regression", f"signature changed: {expected.signature} -> {verdict.signature}"


def unavailable(case: CorpusCase) -> str:
    """Why ``case`` cannot run here ('' when it can)."""
    record = case.record
    try:
        case.to_case()
        target = get_target(record.target)
        reference = get_target(record.reference)
    except (ImportError, NebisectError) as exc:
        return f"target {record.target} cannot be set up here: {exc}"
    for name, candidate in ((record.target, target), (record.reference, reference)):
        reason = candidate.availability()
        if reason:
            return f"{name} unavailable here: {reason}"
    return ""


def run_case(
    case: CorpusCase,
    isolator: Isolator,
    workdir: Path,
    *,
    fixes: Sequence[Fix] = (),
    timeouts: Timeouts = DEFAULT_TIMEOUTS,
) -> CaseRun:
    """Evaluate one case (optionally with ``fixes`` applied) in isolation, from a private
    copy of its listed files under ``workdir``. The fixes rewrite a package's default
    program: a case of one function of a multifunction package takes none."""
    record = case.record
    if record.function and fixes:
        raise NebisectError(f"case {record.label}: fixes rewrite a package's default "
                            f"program, not its function {record.function!r}")
    try:
        case = case.private_copy(workdir)
    except CorruptCaseError as exc:
        return CaseRun(Verdict(Status.ERROR, Stage.LOAD, DAMAGED_SIGNATURE, message=str(exc),
                               target=record.target))
    reason = unavailable(case)
    if reason:
        return CaseRun(Verdict(Status.SKIPPED, record.stage, message=reason, target=record.target))
    if SourceRef(record.source_kind, case.source).is_package and not fixes:
        outcome = evaluate(case.to_case(), reference=record.reference, isolator=isolator,
                           timeout=timeouts.predict)
        return CaseRun(outcome.verdict)
    path = record.options.convert_path
    prepared = fix_source(record.source_kind, case.source, fixes, workdir, isolator,
                          precision=spec_of(record.target).precision, timeouts=timeouts,
                          paths=(path,) if path else None)
    if prepared.package is None:
        prepared.verdict.target = record.target
        return CaseRun(prepared.verdict, prepared)
    outcome = evaluate(on_package(case, prepared.package), reference=record.reference,
                       isolator=isolator, timeout=timeouts.predict)
    return CaseRun(outcome.verdict, prepared)


def on_package(
    case: CorpusCase, package: Path, *, target: str = "", reference_package: Path | None = None
) -> Case:
    """``case`` run on another package (converted or fixed), judged against the original.

    The reference stays the case's own source (torch for torch cases), or
    ``reference_package`` when given (the fp64 equivalence check of a fix).
    """
    base = case.to_case()
    reference = (SourceRef(PACKAGE, str(reference_package)) if reference_package is not None
                 else SourceRef(case.record.source_kind, case.source))
    target = target or base.target
    return Case(
        ref=SourceRef(PACKAGE, str(package)), target=target,
        stage=base.stage, inputs_path=base.inputs_path,
        options=base.options.judged_against(reference, source=SourceRef(PACKAGE, str(package)),
                                            precision=spec_of(target).precision),
    )


def replay_case(case: CorpusCase, isolator: Isolator, workdir: Path,
                timeouts: Timeouts = DEFAULT_TIMEOUTS) -> ReplayResult:
    verdict = run_case(case, isolator, workdir, timeouts=timeouts).verdict
    outcome, reason = judge(case.record.expected, verdict)
    return result_of(case, verdict, outcome, reason)


def result_of(case: CorpusCase, verdict: Verdict, outcome: str, reason: str) -> ReplayResult:
    record = case.record
    return ReplayResult(record.case_id, record.label, record.target, record.expected, verdict,
                        outcome, reason)


def selected(case: CorpusCase, targets: Sequence[str]) -> bool:
    """True when no ``--target`` filter is given or one of its patterns matches."""
    return not targets or any(fnmatch.fnmatchcase(case.record.target, t) for t in targets)


def replay(
    cases: Sequence[CorpusCase],
    *,
    targets: Sequence[str] = (),
    jobs: int = 1,
    timeouts: Timeouts = DEFAULT_TIMEOUTS,
    on_result: Callable[[ReplayResult], None] | None = None,
    runner: Runner | None = None,
) -> ReplaySummary:
    """Replay ``cases`` (in corpus order in the summary, whatever order they finish) on
    the command's ``runner`` (default: one of ``jobs`` threads here, for this call)."""
    chosen = [c for c in cases if selected(c, targets)]

    def judged(index: int, unit_result: UnitResult) -> None:
        case = chosen[index]
        verdict = unit_verdict(unit_result, case)
        finished.append(result_of(case, verdict, *judge(case.record.expected, verdict)))
        if on_result is not None:
            on_result(finished[-1])

    finished: list[ReplayResult] = []
    units = [replay_unit_of(case, timeouts) for case in chosen]
    with using(runner, jobs) as running:
        running.map_units(units, judged)
    return summarize(cases, finished, targets)


@dataclass(frozen=True)
class ReplayArguments:
    """A ``replay`` unit's arguments: the case's record as the JSON text of its case file
    (checked by the handler, where a damaged one is a verdict) and the stage timeouts."""

    record: str
    timeouts: Timeouts


def replay_unit_of(case: CorpusCase, timeouts: Timeouts) -> Unit:
    """The ``replay`` unit of a scanned case: its record and its listed files."""
    return Unit("replay", encode(ReplayArguments(case.record.to_json(), timeouts)),
                paths=sorted(case.record.files), root=case.path, label=case.case_id)


def replay_unit(arguments: ReplayArguments, root: Path, workdir: Path,
                isolator: Isolator) -> dict[str, Any]:
    """Handler of ``replay`` units: the case under ``root`` run as :func:`run_case` does
    (from a private, verified copy), its verdict as JSON (judged by the caller)."""
    try:
        record = CaseRecord.from_json(arguments.record)
    except CorruptCaseError as exc:
        verdict = Verdict(Status.ERROR, Stage.LOAD, DAMAGED_SIGNATURE,
                          message=f"{CASE_FILE}: {exc}")
    else:
        verdict = run_case(CorpusCase(record, root), isolator, workdir,
                           timeouts=arguments.timeouts).verdict
    return {"verdict": verdict.to_dict()}


def unit_verdict(result: UnitResult, case: CorpusCase) -> Verdict:
    """The verdict in a unit's result; an ``error`` saying why when there is none. Where
    it ran is stamped on it when that was not here, and every attempt when it took more
    than one."""
    record = case.record
    if result.value is None:
        verdict = Verdict(Status.ERROR, record.stage, LOST_SIGNATURE, target=record.target,
                          message=f"no verdict: {result.error}")
    else:
        verdict = Verdict.from_dict(result.value["verdict"])
    if result.worker and result.worker != LOCAL:
        verdict.provenance["worker"] = result.worker
    if len(result.attempts) > 1 or result.value is None:
        verdict.process.worker_attempts = result.describe_attempts()
    return verdict


def summarize(
    cases: Sequence[CorpusCase],
    finished: Sequence[ReplayResult],
    targets: Sequence[str] = (),
    stopped: str = "",
) -> ReplaySummary:
    """Every case's result in corpus order; a case without one is ``skipped`` — its
    target was not selected, or the replay was ``stopped`` (e.g. "interrupted by
    SIGTERM") before it ran."""
    summary = ReplaySummary()
    by_id = {r.case_id: r for r in finished}
    for case in cases:
        if case.case_id in by_id:
            summary.results.append(by_id[case.case_id])
            continue
        chosen = selected(case, targets)
        reason = (f"not run: {stopped}" if chosen
                  else f"target {case.record.target} not selected by --target")
        skipped = Verdict(Status.SKIPPED, case.record.stage, target=case.record.target,
                          message=reason)
        result = result_of(case, skipped, "skipped", reason)
        result.selected = chosen
        summary.results.append(result)
    return summary


def record_updates(corpus: Corpus, summary: ReplaySummary) -> list[ReplayResult]:
    """``--update``: re-record every case whose expectation no longer describes it."""
    updated = []
    for result in summary.results:
        if result.outcome == "skipped":
            continue
        expected = Expected.from_verdict(result.verdict, previous=result.expected)
        if (expected.status, expected.signature) != (result.expected.status,
                                                     result.expected.signature):
            corpus.update_expected(corpus.find(result.case_id), expected)
            updated.append(result)
    return updated

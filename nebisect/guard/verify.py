"""``fix verify``: replay the corpus without and with fixes, and say what each fix did.

Per case:

* ``fixed`` — failed without the fixes, passes with them;
* ``still failing`` — fails either way;
* ``regressed`` — passed without them and fails with them; or the fixed program is not
  the same math (its fp64 evaluation leaves fp64 tolerance of the original's); or an
  op moved off the accelerator the target requires (on a Neural Engine target a pass
  on CPU fallback is not a pass — seed 000's acceptance);
* ``unaffected`` — no fix touched the case, or it passes either way.

A case whose record names fixes (``fixes`` in ``case.json``) also states a promise:
when those fixes are selected and the case is not ``fixed`` by them, the promise is
broken and reported (``broken_promises``).

Each case is one ``verify`` unit on an executor (:mod:`nebisect.executors`: threads
here, or a Dask cluster's workers): the fixes travel by name, the case as its record
and files, the verification comes back as JSON. A case that got no verification (its
workers died twice) counts as ``regressed``: it proved nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from nebisect.codec import Form, Record, encode
from nebisect.corpus.record import CaseRecord
from nebisect.corpus.store import CorpusCase
from nebisect.evaluate.judge import evaluate
from nebisect.executors import UnitResult
from nebisect.executors.runner import Runner, using
from nebisect.fixes import registered_fixes, resolve_fixes
from nebisect.fixes.base import Fix
from nebisect.guard.replay import LOST_SIGNATURE, on_package, replay_unit_of, run_case
from nebisect.isolate import Isolator
from nebisect.isolation.timeouts import DEFAULT_TIMEOUTS, Timeouts
from nebisect.targets.placement import required_devices
from nebisect.targets.spec import REFERENCE_TARGET
from nebisect.verdict import ProcessFacts, Status, Verdict

CATEGORIES = ("fixed", "still failing", "regressed", "unaffected")


@dataclass
class CaseVerification(Record):
    """One case replayed without (``before``) and with (``after``) the fixes; its JSON
    lists the verdicts last."""

    json_form: ClassVar[Form] = Form(order=(
        "case_id", "label", "target", "claimed", "category", "detail", "rewrites",
        "converter_fixes", "promise_broken"))

    case_id: str
    label: str
    target: str
    claimed: list[str]
    before: Verdict
    after: Verdict | None
    category: str
    detail: str
    rewrites: dict[str, int] = field(default_factory=dict)
    converter_fixes: list[str] = field(default_factory=list)
    promise_broken: bool = False


@dataclass
class VerifyReport:
    fixes: list[str]
    cases: list[CaseVerification] = field(default_factory=list)

    def count(self, category: str) -> int:
        return sum(c.category == category for c in self.cases)

    @property
    def broken_promises(self) -> list[CaseVerification]:
        return [c for c in self.cases if c.promise_broken]

    @property
    def ok(self) -> bool:
        return not self.count("regressed") and not self.broken_promises


def verify(
    cases: Sequence[CorpusCase],
    fixes: Sequence[Fix],
    *,
    jobs: int = 1,
    timeouts: Timeouts = DEFAULT_TIMEOUTS,
    on_case: Callable[[CaseVerification], None] | None = None,
    runner: Runner | None = None,
) -> VerifyReport:
    """Verify ``fixes`` against every case on the command's ``runner`` (default: one of
    ``jobs`` threads here, for this call); results in corpus order."""
    names = [f.name for f in fixes]
    units = []
    for case in cases:
        arguments = VerifyArguments(case.record.to_json(), timeouts, names)
        units.append(replace(replay_unit_of(case, timeouts), kind="verify",
                             payload=encode(arguments)))

    verifications: dict[int, CaseVerification] = {}

    def parsed(index: int, result: UnitResult) -> None:
        verifications[index] = (CaseVerification.from_dict(result.value)
                                if result.value is not None else _lost(cases[index], result))
        if on_case is not None:
            on_case(verifications[index])

    with using(runner, jobs) as running:
        running.map_units(units, parsed)
    return VerifyReport(names, [verifications[i] for i in range(len(cases))])


def _lost(case: CorpusCase, result: UnitResult) -> CaseVerification:
    """A case no worker came back from: it verified nothing, so it fails the run."""
    record = case.record
    lost = Verdict(Status.ERROR, record.stage, LOST_SIGNATURE, message=result.error,
                   target=record.target,
                   process=ProcessFacts(worker_attempts=result.describe_attempts()))
    return CaseVerification(record.case_id, record.label, record.target, [], lost, None,
                            "regressed", f"no verification: {result.error}")


@dataclass(frozen=True)
class VerifyArguments:
    """A ``verify`` unit's arguments: a replay unit's (the case file's JSON text, the
    stage timeouts) and the names of the fixes to verify."""

    record: str
    timeouts: Timeouts
    fixes: list[str]


def verify_unit(arguments: VerifyArguments, root: Path, workdir: Path,
                isolator: Isolator) -> dict[str, Any]:
    """Handler of ``verify`` units: :func:`verify_case` on the case under ``root``."""
    case = CorpusCase(CaseRecord.from_json(arguments.record), root)
    result = verify_case(case, resolve_fixes(arguments.fixes), isolator, workdir,
                         arguments.timeouts)
    return result.to_dict()


def verify_case(
    case: CorpusCase,
    fixes: Sequence[Fix],
    isolator: Isolator,
    workdir: Path,
    timeouts: Timeouts = DEFAULT_TIMEOUTS,
) -> CaseVerification:
    record = case.record
    selected = {f.name for f in fixes}
    claimed = [name for name in record.fixes if name in selected]
    before = run_case(case, isolator, workdir / "before", timeouts=timeouts).verdict
    result = CaseVerification(record.case_id, record.label, record.target, claimed, before,
                              None, "unaffected", "")
    if before.status == "skipped":
        result.detail = before.message
        return result
    if record.function:
        result.detail = (f"not verified: fixes rewrite a package's default program, not "
                         f"its function {record.function!r}")
        return result
    after_run = run_case(case, isolator, workdir / "after", fixes=fixes, timeouts=timeouts)
    prepared = after_run.prepared
    if prepared is not None:
        result.rewrites = prepared.rewrites
        result.converter_fixes = prepared.converter_fixes
    if prepared is not None and prepared.package is not None and not prepared.changed:
        result.detail = "no fix matched this case" + _candidates(before)
    else:
        result.after = after_run.verdict
        result.category, result.detail = _categorize(before, after_run.verdict)
        if result.category != "regressed" and prepared is not None and prepared.package:
            _check_equivalence(result, case, prepared.package, prepared.converted, isolator,
                               timeouts.predict)
    result.promise_broken = bool(claimed) and result.category != "fixed"
    return result


def _candidates(before: Verdict) -> str:
    """For a failing case no selected fix touched: the registered fixes that claim it."""
    if not before.failed:
        return ""
    names = [name for name, cls in registered_fixes().items() if cls.claims(before.signature)]
    return f" (fixes claiming {before.signature}: {', '.join(names)})" if names else ""


def _categorize(before: Verdict, after: Verdict) -> tuple[str, str]:
    # A fix that moves the work off the accelerator is a regression, whether the fixed
    # case then passes or is ``unrouted`` (placement fails closed: every op elsewhere).
    moved = moved_off_accelerator(before, after)
    if moved and after.status in ("pass", "unrouted"):
        where = "/".join(required_devices(after.target))
        ops = ", ".join(f"{op} on {device}" for op, device in moved)
        passes = "passes, but " if after.status == "pass" else ""
        return "regressed", f"{passes}placement moved off {where}: {ops}"
    if after.failed:
        if before.failed:
            return "still failing", f"{before.signature} -> {after.signature}"
        first = after.message.splitlines()[0] if after.message else ""
        return "regressed", f"pass -> {after.signature} {first}".strip()
    if before.failed:
        return "fixed", f"{before.signature} -> pass"
    return "unaffected", "passes with and without the fixes"


def moved_off_accelerator(before: Verdict, after: Verdict) -> list[tuple[str, str]]:
    """Ops the fixed program runs off the required device that the original did not.

    Only meaningful when the original run reported placement (a predict-stage error
    has none, and then there is nothing to compare against).
    """
    required = required_devices(after.target)
    if not required or not after.placement or not before.placement:
        return []
    off_before = {op for op, device in before.placement.items() if device not in required}
    return sorted((op, device) for op, device in after.placement.items()
                  if device not in required and op not in off_before)


def _check_equivalence(
    result: CaseVerification,
    case: CorpusCase,
    fixed: Path,
    original: Path | None,
    isolator: Isolator,
    timeout: float,
) -> None:
    """The fixed program at fp64 must agree with the unfixed one at fp64."""
    if original is None or fixed == original:
        return
    check = on_package(case, fixed, target=REFERENCE_TARGET, reference_package=original)
    verdict = evaluate(check, reference=REFERENCE_TARGET, isolator=isolator,
                       timeout=timeout).verdict
    if verdict.failed:
        result.category = "regressed"
        result.detail = f"the fix changes the math (fp64 vs original: {verdict.signature})"

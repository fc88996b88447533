"""The fuzzing engine: Hypothesis generates, climbs and shrinks; findings are deduplicated.

The engine knows neither the op nor how a case runs: it gets a :class:`Subject`
(a strategy of JSON cases, a dedup class, a one-parameter family and predicted
boundaries for cliff reports) and an ``evaluate(case) -> Evaluation`` callable.

One campaign is a sequence of Hypothesis runs, each seeded from ``--seed`` and the run
index (``database=None``: nothing from earlier sessions leaks in, so the same seed gives
the same findings). A run generates cases (``hypothesis.target()`` on the error pulls
the search toward failures) until the first failure whose key — signature plus the
subject's parameter class — is new; Hypothesis then shrinks that failure, and only
that key counts as failing while it shrinks, so the shrinker can never slip to another
bug (other failures it meets are left to later runs to find, so every finding reported
is a shrunk one). The next run continues with the remaining budget and the known keys
silenced. ``--budget`` counts distinct generated cases; shrinking is charged to a
separate per-finding budget of evaluations, and candidates beyond it count as not
failing, which ends the shrink without making Hypothesis see a flaky test (every case
already evaluated keeps its cached outcome).

Numeric findings are then localized to two adjacent fp16 values by
:func:`nebisect.search.cliff.localize` over the subject's family, both sides read at the
element the failing side breaks at. :mod:`nebisect.fuzzing.causes` groups the findings by
root cause for the reports.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import hypothesis
import numpy as np
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import strategies as st

from nebisect.codec import Record
from nebisect.fuzzing.hermetic import without_local_constants
from nebisect.search.cliff import Boundary, Cliff, localize
from nebisect.search.readout import Element, breaking_element, read
from nebisect.verdict import Verdict

#: verdict statuses that make a finding (unrouted and skipped cases are not judged)
FINDING_STATUSES = ("crash", "error", "timeout", "oom", "mismatch")
#: signatures worth a cliff search: value-dependent numeric failures
CLIFF_SIGNATURES = ("mismatch:collapse", "mismatch:nonfinite", "mismatch:tolerance")
_MAX_RUNS = 64


class Subject(Protocol):
    """What the engine fuzzes; see :class:`nebisect.fuzzing.subject.OpSubject`."""

    @property
    def name(self) -> str: ...

    @property
    def cases(self) -> st.SearchStrategy[dict[str, Any]]: ...

    def param_class(self, case: dict[str, Any]) -> str: ...

    def boundaries(self, case: dict[str, Any]) -> list[Boundary]: ...

    def family(self, case: dict[str, Any], x: float) -> dict[str, Any]: ...

    def family_start(self, case: dict[str, Any]) -> float | None: ...


@dataclass
class Evaluation:
    """One evaluated case: the verdict and the judged element's value on both sides.

    ``score`` — how close a passing case came to failing — is what Hypothesis climbs
    (``hypothesis.target``); None keeps the case out of the climb. Reporting it only
    for near misses matters: hill-climbing every pass walks thousands of choice
    sequences that never reach a failure. ``arrays`` are the outputs as the case
    returned them (``out:NAME``, ``ref:NAME``; in memory only), so a cliff reads both
    its sides at the element that breaks.
    """

    verdict: Verdict
    output: float | None = None
    reference: float | None = None
    score: float | None = None
    arrays: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def describe(self) -> dict[str, Any]:
        return {"output": self.output, "reference": self.reference,
                "signature": self.verdict.signature}

    def breaking(self) -> Element | None:
        """The first element the verdict got wrong, when the outputs are at hand."""
        return breaking_element(self.verdict) if self.arrays else None

    def describe_at(self, element: Element) -> dict[str, Any]:
        """:meth:`describe` at ``element`` instead of the judged element."""
        reading = read(self.arrays, element)
        return {"output": reading.output, "reference": reading.reference,
                "signature": self.verdict.signature}


@dataclass
class CampaignConfig:
    budget: int = 200
    seed: int = 0
    shrink_budget: int = 100
    cliff: bool = True
    cliff_range: tuple[float, float] = (-15.0, 15.0)
    cliff_grid: str = "fp16"


@dataclass
class Finding(Record):
    """One deduplicated failure, shrunk, with its cliff when it has one."""

    subject: str
    param_class: str
    signature: str
    status: str
    message: str
    case: dict[str, Any]
    first_case: dict[str, Any]
    hits: int = 1
    shrink_evaluations: int = 0
    output: float | None = None
    reference: float | None = None
    verdict: dict[str, Any] = field(default_factory=dict)
    cliff: Cliff | None = None
    case_dir: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return (self.signature, self.param_class)


@dataclass
class CampaignProgress:
    """Live counters for a progress display."""

    subject: str
    phase: str
    generated: int
    evaluations: int
    findings: int
    elapsed: float

    @property
    def rate(self) -> float:
        return self.evaluations / self.elapsed if self.elapsed > 0 else 0.0


@dataclass
class CampaignResult(Record):
    subject: str
    seed: int
    budget: int
    generated: int = 0
    evaluations: int = 0
    runs: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    elapsed: float = 0.0
    skipped: str = ""
    #: The campaign was stopped (Ctrl-C, SIGTERM, a failing sibling) before its budget
    #: was spent: its findings are those found until then.
    interrupted: bool = False


class _Found(Exception):
    """Raised inside a Hypothesis run for the key that run is shrinking."""

    def __init__(self, case: dict[str, Any], evaluation: Evaluation) -> None:
        super().__init__(evaluation.verdict.signature)
        self.case, self.evaluation = case, evaluation


class _Exhausted(BaseException):
    """Ends a Hypothesis run when the budget is spent."""


class _Abort(BaseException):
    """Carries an infrastructure error out of Hypothesis without being shrunk as a bug."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass
class _Run:
    target: tuple[str, str] | None = None
    first: dict[str, Any] = field(default_factory=dict)
    generated: int = 0
    shrink_evaluations: int = 0


def canonical(case: dict[str, Any]) -> str:
    """The cache key of a case: its canonical JSON."""
    return json.dumps(case, sort_keys=True, separators=(",", ":"))


def _find(error: BaseException) -> _Found | None:
    if isinstance(error, _Found):
        return error
    for inner in getattr(error, "exceptions", ()):
        found = _find(inner)
        if found is not None:
            return found
    return None


class Campaign:
    """Fuzz one subject; :meth:`run` returns the deduplicated, shrunk, localized findings."""

    def __init__(
        self,
        subject: Subject,
        evaluate: Callable[[dict[str, Any]], Evaluation],
        config: CampaignConfig | None = None,
        on_progress: Callable[[CampaignProgress], None] | None = None,
    ) -> None:
        self.subject, self._evaluate_case = subject, evaluate
        self.config = config or CampaignConfig()
        self.on_progress = on_progress
        self.result = CampaignResult(subject.name, self.config.seed, self.config.budget)
        self._cache: dict[str, Evaluation] = {}
        self._found: dict[tuple[str, str], Finding] = {}
        self._hits: Counter[tuple[str, str]] = Counter()
        self._phase = "generate"
        self._start = 0.0

    def run(self) -> CampaignResult:
        """The campaign's result; ``self.result`` holds what was found so far meanwhile,
        and, if the run is interrupted, the findings until then (``interrupted`` set)."""
        self._start = time.perf_counter()
        try:
            self._explore()
            self._collect()
            if self.config.cliff:
                self._phase = "cliff"
                for finding in self.result.findings:
                    if finding.signature in CLIFF_SIGNATURES:
                        finding.cliff = self._localize(finding)
                        self._report()
        except BaseException:
            self.result.interrupted = True
            self._collect()
            raise
        finally:
            self.result.elapsed = time.perf_counter() - self._start
        return self.result

    def _explore(self) -> None:
        remaining = self.config.budget
        while remaining > 0 and self.result.runs < _MAX_RUNS:
            run = self._hypothesis_run(self.result.runs, remaining)
            self.result.runs += 1
            remaining -= run.generated
            if run.target is None and not run.generated:
                break  # Hypothesis has nothing new to generate

    def _collect(self) -> None:
        self.result.findings = list(self._found.values())
        for finding in self.result.findings:
            finding.hits = self._hits[finding.key]

    def _evaluate(self, case: dict[str, Any]) -> Evaluation:
        key = canonical(case)
        if key not in self._cache:
            try:
                evaluation = self._evaluate_case(case)
            except Exception as exc:
                raise _Abort(exc) from exc
            self._cache[key] = evaluation
            self.result.evaluations += 1
            status = evaluation.verdict.status
            self.result.statuses[status] = self.result.statuses.get(status, 0) + 1
            self._report()
        return self._cache[key]

    def _key(self, case: dict[str, Any], evaluation: Evaluation) -> tuple[str, str] | None:
        verdict = evaluation.verdict
        if verdict.status not in FINDING_STATUSES or verdict.stage == "reference":
            return None
        return (verdict.signature, self.subject.param_class(case))

    def _hypothesis_run(self, index: int, budget: int) -> _Run:
        run = _Run()
        self._phase = "generate"

        def check(case: dict[str, Any]) -> None:
            cached = canonical(case) in self._cache
            if run.target is None and not cached:
                if run.generated >= budget:
                    raise _Exhausted
                run.generated += 1
                self.result.generated += 1
            elif not cached:
                if run.shrink_evaluations >= self.config.shrink_budget:
                    return
                run.shrink_evaluations += 1
            evaluation = self._evaluate(case)
            if evaluation.score is not None:
                hypothesis.target(evaluation.score, label="error")
            key = self._key(case, evaluation)
            if key is None:
                return
            if not cached:
                self._hits[key] += 1
            if key in self._found:
                return
            if run.target is None:
                run.target, run.first = key, case
                self._phase = "shrink"
            if key == run.target:
                raise _Found(case, evaluation)

        explore = hypothesis.seed(self.config.seed * 1_000_003 + index)(
            settings(
                max_examples=budget, database=None, deadline=None, derandomize=False,
                phases=(Phase.generate, Phase.target, Phase.shrink),
                report_multiple_bugs=False, suppress_health_check=list(HealthCheck),
                verbosity=Verbosity.quiet,
            )(given(self.subject.cases)(check))
        )
        try:
            with without_local_constants():
                explore()
        except _Exhausted:
            pass  # raised only while generating: no failure is being shrunk
        except _Abort as abort:
            raise abort.error from None
        except Exception as error:
            found = _find(error)
            if found is None or run.target is None:
                raise
            finding = self._finding(run.target, found.case, found.evaluation, run.first)
            finding.shrink_evaluations = run.shrink_evaluations
            self._found[run.target] = finding
        return run

    def _finding(self, key: tuple[str, str], case: dict[str, Any], evaluation: Evaluation,
                 first: dict[str, Any]) -> Finding:
        verdict = evaluation.verdict
        return Finding(
            subject=self.subject.name, param_class=key[1], signature=key[0],
            status=verdict.status, message=verdict.message, case=case, first_case=first,
            output=evaluation.output, reference=evaluation.reference,
            verdict=verdict.to_dict(),
        )

    def _localize(self, finding: Finding) -> Cliff | None:
        return localize_finding(self.subject, self._evaluate, finding, self.config)

    def _report(self) -> None:
        if self.on_progress is not None:
            self.on_progress(CampaignProgress(
                self.subject.name, self._phase, self.result.generated, self.result.evaluations,
                len(self._found), time.perf_counter() - self._start,
            ))


def localize_finding(
    subject: Subject,
    evaluate: Callable[[dict[str, Any]], Evaluation],
    finding: Finding,
    config: CampaignConfig | None = None,
) -> Cliff | None:
    """Pin ``finding`` down over ``subject``'s one-parameter family of its case.

    A probe fails when it reproduces the finding's signature; any other outcome (a pass,
    or a different failure) counts as the other side.
    """
    config = config or CampaignConfig()
    lo, hi = config.cliff_range
    return localize(
        lambda x: evaluate(subject.family(finding.case, x)),
        lambda evaluation: evaluation.verdict.signature == finding.signature,
        lo, hi,
        start=subject.family_start(finding.case),
        grid=config.cliff_grid,
        describe=Evaluation.describe,
        boundaries=subject.boundaries(finding.case),
        element=Evaluation.breaking,
        describe_at=Evaluation.describe_at,
    )

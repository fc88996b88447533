"""How a reduction runs and how it reports: the options of ``bisect`` and the live line.

Below the bisector (:mod:`nebisect.minimize.bisector`), the reductions' context
(:mod:`nebisect.minimize.context`) and the trigger search (:mod:`nebisect.minimize.trigger`),
which all read them; none of those import each other for them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from nebisect.bounds import check_count, check_seconds
from nebisect.detect import DEFAULT_BUDGET
from nebisect.errors import NebisectError
from nebisect.isolation.timeouts import Timeouts
from nebisect.minimize.candidates import CandidateSpace
from nebisect.search.ddmin import PredicateCall, Stats
from nebisect.sources.convert import PATHS
from nebisect.targets.spec import TargetSpec
from nebisect.verdict import Stage

#: The case stages whose failures a reduction can keep while it shrinks the model.
REDUCIBLE_STAGES = (Stage.PREDICT, Stage.CONVERT)
GRAPHS = ("auto", "mil", "fx")
DEFAULT_LENGTH = 8
#: Per-candidate limits: a reduction converts and predicts many times, each bounded.
BISECT_TIMEOUTS = Timeouts(convert=900.0, predict=600.0)


@dataclass
class BisectOptions:
    """How to reduce: the target and stage of the failure, inputs, budget.

    ``paths`` are the torch conversion paths tried, in order (the first that converts
    is reduced); ``budget`` bounds the predictions spent looking for a trigger when no
    ``inputs`` are given (:mod:`nebisect.minimize.trigger`); ``cache`` is the directory
    the source's own conversions are kept in across runs (``--cache``,
    :mod:`nebisect.sources.conversion_cache`; ``""``: none) — a reduction's candidates
    are new models each time and are not kept.
    """

    target: TargetSpec
    stage: str = "predict"
    inputs: str = ""
    length: int = DEFAULT_LENGTH
    max_evals: int | None = None
    timeout: float | None = None
    timeouts: Timeouts = field(default_factory=lambda: BISECT_TIMEOUTS)
    fixes: tuple[str, ...] = ()
    confirm: int | None = None
    graph: str = "auto"
    paths: tuple[str, ...] = PATHS
    budget: int = DEFAULT_BUDGET
    #: the function of a multifunction package to reduce ("": its default)
    function: str = ""
    cache: str = ""

    def __post_init__(self) -> None:
        if self.stage not in REDUCIBLE_STAGES:
            raise NebisectError(
                f"unknown stage {self.stage!r}: one of {', '.join(REDUCIBLE_STAGES)}")
        if self.graph not in GRAPHS:
            raise NebisectError(f"unknown graph {self.graph!r}: one of {', '.join(GRAPHS)}")
        if self.stage == "convert" and self.graph == "mil":
            raise NebisectError("a conversion failure has no ML program: --stage convert "
                                "reduces the torch graph (--graph fx)")
        check_count(f"--length {self.length}", self.length)
        if self.max_evals is not None:
            check_count(f"--max-evals {self.max_evals}", self.max_evals)
        if self.timeout is not None:
            check_seconds(f"--timeout {self.timeout:g}", self.timeout)
        check_count(f"--budget {self.budget}", self.budget)
        if not self.paths or set(self.paths) - set(PATHS):
            raise NebisectError(f"unknown conversion paths {self.paths}: of {', '.join(PATHS)}")

    @property
    def reduced_graph(self) -> str:
        """``fx`` for conversions (and on request for torch predictions), ``mil`` (the
        ML program's ops) otherwise."""
        if self.graph != "auto":
            return self.graph
        return "fx" if self.stage == "convert" else "mil"

    def confirmations(self, signature: str) -> int:
        """Re-checks of each accepted candidate: none where the verdict is deterministic
        (the simulator, or a conversion, failing by error or mismatch), one otherwise —
        a device, a crash, a timeout can be flaky."""
        if self.confirm is not None:
            return self.confirm
        deterministic = (self.stage == "convert" or self.target.simulated) and (
            signature.startswith(("error:", "mismatch:")))
        return 0 if deterministic else 1


@dataclass
class ProgressLine:
    """The live line: "1 000 ops → 3 ops, 21 evaluations" (+ what is running now)."""

    unit: str
    before: int
    best: int
    evaluations: int
    max_evals: int | None = None
    phase: str = ""

    def text(self) -> str:
        line = f"{self.evaluations} evaluations"
        if self.before:  # known once the graph is loaded
            line = (f"{thousands(self.before)} {self.unit} → {thousands(self.best)} "
                    f"{self.unit}, {line}")
        return f"{line} — {self.phase}" if self.phase else line


Progress = Callable[[ProgressLine], None]


def thousands(n: int) -> str:
    return f"{n:,}".replace(",", " ")


class SearchProgress:
    """Counts isolated runs and feeds the live line (from the evaluator's observer)."""

    def __init__(self, progress: Progress | None, unit: str, max_evals: int | None) -> None:
        self.progress = progress
        self.line = ProgressLine(unit, 0, 0, 0, max_evals)
        self.expected: set[str] = set()
        self.setup_runs = 0
        self.space: CandidateSpace | None = None

    @property
    def runs(self) -> int:
        return self.setup_runs + (self.space.runs if self.space is not None else 0)

    def units(self, count: int) -> None:
        self.line.before = self.line.best = count

    def phase(self, text: str) -> None:
        self.line.phase = text
        self._emit()

    def ran(self, count: int = 1) -> None:
        """Isolated runs outside the search (a conversion, the original, a recording)."""
        self.setup_runs += count
        self.line.evaluations = self.runs
        self._emit()

    def observe(self, evaluation: PredicateCall, stats: Stats) -> None:
        if evaluation.signature in self.expected:
            self.line.best = min(self.line.best, evaluation.size)
        self.line.evaluations = self.runs
        self._emit()

    def _emit(self) -> None:
        if self.progress is not None:
            self.progress(self.line)

"""Cost-aware planning: how much exploration, culprit search and cliff localization fit a
run's time budget, given what one prediction costs.

A run spends its exploration budget (``--budget`` units per target, a unit being one
input set on every conversion path of the target) whatever one prediction costs: on a
2 k-parameter model that is seconds, on a 25 M-parameter one over an hour. The run
measures what each target's predictions of its matrix cost (the cheapest: a first one may
wait for a template to import); :func:`plan` turns the seconds left of the time budget
into units per target, reserving time for the culprit
searches (each a recording prediction and its exact twin) that give a failure its op,
and capping the part of the units cliff localization and guided probes may take so that
the value families are still touched. Nothing here runs a model or reads a clock of
its own: costs come in as numbers and the :class:`TimeBudget` reads the :data:`Clock` it
is handed, so a test gives a fake one.

API::

    plan(seconds_left, costs, *, budget, paths, jobs=1) -> ExplorationPlan
    ranked_boundaries(boundaries) -> guided boundaries, most informative first
    TimeBudget(seconds, clock=time.monotonic, default=False)  # .left(), .spent(), .stop()
    eta(done, planned, unit_seconds) -> seconds
    duration_words(seconds) -> "8m" / "90s" / "1h 5m"
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from nebisect.codec import Record
from nebisect.search.cliff import Boundary
from nebisect.search.ddmin import Stats

#: what the planner reads the time with (seconds, monotonic)
Clock = Callable[[], float]

#: a prediction costing more than this (seconds, the slowest target's first) makes a model
#: expensive: without ``--time-budget`` it runs under :data:`DEFAULT_TIME_BUDGET`
EXPENSIVE_PREDICTION = 1.0
#: the whole run's budget for an expensive model (seconds) when none is given: a
#: real-size model's conversions (two minutes on 2 cores for ResNet-50) and matrix fit,
#: with a few minutes of exploration, inside the ten minutes a default run may take —
#: the two left over cover the prediction, culprit search and torch comparison a
#: spent budget still finishes
DEFAULT_TIME_BUDGET = 480.0
#: predictions one culprit search costs: the target's cell recording every intermediate
#: and the exact program's (or torch's) recording to compare it with, plus an attribution
#: probe
CULPRIT_PREDICTIONS = 3
#: culprit searches per target the plan keeps time for before exploring
CULPRIT_RESERVE = 2
#: at most this share of a constrained plan's units localizes cliffs, and as much goes
#: to guided probes: the rest touches the families
LOCALIZE_SHARE = 0.5
GUIDED_SHARE = 0.5
#: how the option names itself in what the report says
TIME_BUDGET_OPTION = "--time-budget"


@dataclass(frozen=True)
class ExplorationPlan:
    """What fits: ``explore`` units per target (of ``budget`` asked), of which at most
    ``localize`` bisect cliffs and at most ``guided`` guided boundaries are probed (two
    units each; None: as many as there are); ``culprits`` culprit searches kept per
    target; ``seconds`` the plan's expected wall seconds. ``note`` says why it is smaller
    than asked ("" when it is not)."""

    explore: int
    budget: int
    localize: int
    guided: int | None
    culprits: int
    seconds: float
    note: str = ""

    @property
    def constrained(self) -> bool:
        return self.explore < self.budget

    @property
    def skipped(self) -> int:
        """Units per target the time does not allow."""
        return self.budget - self.explore


def plan(seconds_left: float | None, costs: Mapping[str, float], *, budget: int,
         paths: Mapping[str, int], jobs: int = 1, reference: float = 0.0) -> ExplorationPlan:
    """The exploration that fits ``seconds_left`` (None: no time budget, the whole
    ``budget``) for targets whose one prediction costs ``costs[target]`` seconds on
    ``paths[target]`` conversion paths, ``jobs`` targets explored at once, the expected
    outputs of a new input set costing ``reference`` seconds (once, whichever target
    gets there first).

    One unit of every target costs (Σ paths × cost + reference) / jobs of wall time (the
    targets run in parallel, so their costs add up over the jobs); the culprit reserve
    comes off the top.
    """
    if seconds_left is None:
        return ExplorationPlan(budget, budget, budget, None, CULPRIT_RESERVE, 0.0)
    parallel = max(1, min(jobs, len(costs)))
    unit = (sum(paths.get(t, 1) * cost for t, cost in costs.items()) + reference) / parallel
    reserve = sum(CULPRIT_RESERVE * CULPRIT_PREDICTIONS * cost for cost in costs.values()
                  ) / parallel
    left = max(seconds_left, 0.0)
    culprits = CULPRIT_RESERVE if left >= reserve else (
        int(left * parallel / max(CULPRIT_PREDICTIONS * sum(costs.values()), 1e-9)))
    spare = left - reserve if culprits == CULPRIT_RESERVE else 0.0
    units = budget if unit <= 0 else min(budget, math.floor(spare / unit))
    if units >= budget:
        return ExplorationPlan(budget, budget, budget, None, culprits, budget * unit + reserve)
    note = (f"{units} of {budget} predictions per target fit the "
            f"{duration_words(left)} left" if units else
            f"no exploration fits the {duration_words(left)} left")
    return ExplorationPlan(units, budget, math.floor(units * LOCALIZE_SHARE),
                math.floor(units * GUIDED_SHARE / 2), culprits,
                units * unit + culprits * CULPRIT_PREDICTIONS * sum(costs.values()) / parallel,
                note)


@dataclass
class TimeBudget:
    """The run's wall-time budget, read on ``clock`` from when it is made. ``default``:
    applied because the model is expensive and no budget was given."""

    seconds: float
    clock: Clock = time.monotonic
    default: bool = False
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()

    def spent(self) -> float:
        return self.clock() - self.started

    def left(self) -> float:
        return self.seconds - self.spent()

    @property
    def exhausted_words(self) -> str:
        return f"time budget of {duration_words(self.seconds)} spent"

    def stop(self, _stats: Stats | None = None) -> str | None:
        """A stop condition (:data:`nebisect.search.ddmin.Stop`): the reason once the
        budget is spent, else None."""
        return self.exhausted_words if self.left() <= 0 else None


@dataclass
class BudgetNote(Record):
    """What the report says of a run under a time budget: the budget (seconds; applied
    by ``default`` to an expensive model, or given), the slowest target's first
    prediction and the conversions' seconds it was planned from, the plan (units per
    target of the budget asked), the matrix's input sets left unevaluated, the units each
    explored target left unexplored, the targets not explored at all, and why (the plan's
    note, or the budget spent)."""

    seconds: float
    default: bool
    prediction_seconds: float
    conversion_seconds: float
    planned: int
    budget: int
    skipped: dict[str, int] = field(default_factory=dict)
    unexplored_targets: list[str] = field(default_factory=list)
    note: str = ""
    #: the matrix's input sets (labels) not evaluated within the budget: every target has
    #: the verdict of the first, the others wait on time
    unevaluated_sets: list[str] = field(default_factory=list)
    #: how to run under another budget (a default one's note says it; "" for a given one)
    change: str = ""

    def __post_init__(self) -> None:
        if self.default and not self.change:
            self.change = (f"{TIME_BUDGET_OPTION} DURATION sets another "
                           f"(e.g. {TIME_BUDGET_OPTION} 30m)")

    @property
    def words(self) -> str:
        """One line: the budget, where it came from, how to change it."""
        given = (f"default for a model whose prediction takes "
                 f"{self.prediction_seconds:.1f} s (over {EXPENSIVE_PREDICTION:g} s); "
                 f"{self.change}" if self.default else TIME_BUDGET_OPTION)
        return f"time budget {duration_words(self.seconds)} ({given})"

    def account(self, spent: Mapping[str, int], stopped: str = "") -> None:
        """Record what the exploration made: ``spent`` units per target it was planned
        for (0: not explored), and ``stopped``, the budget's reason when it ran out."""
        self.skipped = {target: self.budget - count for target, count in spent.items()}
        self.unexplored_targets = [target for target, count in spent.items() if not count]
        if stopped:
            self.note = f"{self.note}; {stopped}" if self.note else stopped

    def lines(self) -> list[str]:
        """What the report says: the budget, the plan, what was not explored."""
        said = [self.words + f": planned {self.planned} of {self.budget} exploration "
                f"predictions per target" + (f" ({self.note})" if self.note else "")]
        if self.unevaluated_sets:
            said.append("  input sets not evaluated within the budget: "
                        + ", ".join(self.unevaluated_sets))
        if self.unexplored_targets:
            said.append(f"  not explored within the budget: {', '.join(self.unexplored_targets)}")
        skipped = {t: n for t, n in self.skipped.items() if n}
        if skipped:
            said.append("  predictions not made within the budget: " + ", ".join(
                f"{target} {count}" for target, count in skipped.items()))
        return said


def ranked_boundaries(boundaries: Sequence[Boundary]) -> list[Boundary]:
    """Guided boundaries, the most informative first: the smallest value first, the one
    inputs nearest the realistic ones reach (a boundary at 6e4 is a margin more often
    than a finding); ties keep lint's order, so the order is the same every run."""
    return sorted(boundaries, key=lambda boundary: boundary.value)


def eta(done: int, planned: int, unit_seconds: float) -> float:
    """Seconds until ``planned`` units are done, ``done`` of them made, one costing
    ``unit_seconds``."""
    return max(planned - done, 0) * unit_seconds


def duration_words(seconds: float) -> str:
    """``480`` → ``8m``, ``90`` → ``1m 30s``, ``42.5`` → ``42s``, ``3900`` → ``1h 5m``."""
    whole = max(round(seconds), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else "",
             f"{secs}s" if secs and not hours else ""]
    return " ".join(p for p in parts if p) or "0s"

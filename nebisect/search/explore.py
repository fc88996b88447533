"""The discovery engine: spend a prediction budget on value families, localize the cliffs
it runs into, group what fails.

``run`` with one standard-normal input per length missed seed 000's collapse: the
trigger is a *regime* (all 32 channels equal and above 7.62), not a length. The engine
searches for such regimes without knowing the model, in this order:

1. **guided probes** — boundaries lint's interval analysis predicts
   (:mod:`nebisect.inputs.probes`), each evaluated in the ``const`` family just below
   and just above its value: a static warning becomes a confirmed (or refuted) finding;
2. **round-robin over the families** — member 0 of every family, then member 1 of
   every family, …: a small budget still touches every family, and each family orders
   its own members for coverage (both ends of a range before its middle);
3. **cliff localization** — whenever a one-parameter family fails at some x and does
   not at another x of the same sign nearer 0 (or the other way round: underflows fail
   near 0), the transition is bisected on the fp16 grid of x down to two adjacent values
   by :func:`nebisect.search.cliff.localize`, once per (family, group). Both sides are
   shown at the element the failing side breaks at (when observations carry their
   arrays); a bisection the budget or the stop condition cuts short keeps its bracket
   with the reason (``CliffFinding.stopped``): it says where the family fails from, not
   where a cliff is.

Failures are grouped by (signature, culprit op type, conversion path) — the culprit and
path are opaque keys from the injected ``evaluate`` — and each group keeps its smallest
member (nearest the benign start) and every input set it covers. The engine stops when
the budget is spent or an injected stop condition fires (``nebisect.search.ddmin.Budget``:
deadline, Ctrl-C) and still returns everything found so far. It has no randomness of
its own: the same families (same seed) give the same order and the same result.

API::

    explore(evaluate, families, *, budget, guided=(), guided_family="const", stop=None,
            progress=None) -> Exploration

    evaluate(input_set: InputSet) -> Observation | Verdict | Sequence[Observation]
        # one call = one unit of budget (an evaluate that runs several conversion paths
        # returns one Observation per path and is still charged once)
    families: Sequence[Space]          # nebisect.inputs.families.build(inputs, names, seed)
    guided: Sequence[Boundary]          # Probe.boundary() of nebisect.inputs.probes
    stop(stats: nebisect.search.ddmin.Stats) -> reason | None
    progress(ExploreProgress)                  # after every prediction

The records (:class:`Observation`, :class:`Exploration` and its parts) live in
:mod:`nebisect.search.records` and are re-exported here.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial

from nebisect.search.cliff import GRIDS, Boundary, localize
from nebisect.search.ddmin import Stats, Stop
from nebisect.search.readout import Element, breaking_element, read
from nebisect.search.records import (
    CliffFinding,
    Exploration,
    FailureGroup,
    FamilyTally,
    GroupKey,
    GuidedOutcome,
    Observation,
)
from nebisect.search.space import InputSet, Member, ParametricSpace, Space
from nebisect.verdict import Verdict

__all__ = ["Evaluate", "Exploration", "ExploreProgress", "Observation", "explore"]

Evaluate = Callable[[InputSet], "Observation | Verdict | Sequence[Observation]"]
_FP16 = GRIDS["fp16"]
#: why a cliff's bisection stopped short when the plan's share of localization ran out
LOCALIZATION_SPENT = "the predictions planned for localizing cliffs spent"


@dataclass(frozen=True)
class ExploreProgress:
    """Reported after every prediction, for a progress bar."""

    spent: int
    budget: int
    failures: int
    groups: int
    #: predictions per second since the start
    rate: float
    label: str


def explore(
    evaluate: Evaluate,
    families: Sequence[Space],
    *,
    budget: int,
    guided: Sequence[Boundary] = (),
    guided_family: str = "const",
    stop: Stop | None = None,
    progress: Callable[[ExploreProgress], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    localize: int | None = None,
) -> Exploration:
    """Evaluate ``families``' members within ``budget`` predictions (see the module doc),
    at most ``localize`` of them (None: any) bisecting cliffs."""
    return _Explorer(evaluate, families, budget, guided, stop, progress, clock,
                     localize).run(guided_family)


class _Explorer:
    def __init__(
        self, evaluate: Evaluate, families: Sequence[Space], budget: int,
        guided: Sequence[Boundary], stop: Stop | None,
        progress: Callable[[ExploreProgress], None] | None, clock: Callable[[], float],
        localize: int | None = None,
    ) -> None:
        self.evaluate, self.budget, self.guided = evaluate, budget, list(guided)
        #: predictions cliff localization may still make (None: within the budget alone)
        self.localizing = localize
        self.stop, self.progress, self.clock = stop, progress, clock
        self.families = {family.name: family for family in families}
        self.result = Exploration(budget, families={name: FamilyTally() for name in self.families})
        self.seen: dict[tuple[str, str], list[Observation]] = {}
        #: one-parameter families: x → the group keys failing there
        self.points: dict[str, dict[float, set[GroupKey]]] = {name: {} for name in self.families}
        self.groups: dict[GroupKey, FailureGroup] = {}
        self.localized: set[tuple[str, GroupKey]] = set()
        self.stats = Stats()
        self.failures = 0
        self.started = clock()

    def run(self, guided_family: str) -> Exploration:
        plans = {name: family.admitted_plan() for name, family in self.families.items()}
        for name, plan in plans.items():
            self.result.families[name].planned = len(plan)
        self._guide(self.families.get(guided_family))
        for name, label in _round_robin(plans):
            family = self.families[name]
            if self._visit(family, label, partial(family.materialize, label)) is None:
                break
            self._localize_new(family)
        for name, plan in plans.items():
            self.result.families[name].unexplored = [
                label for label in plan if (name, label) not in self.seen
            ]
        self.result.groups = list(self.groups.values())
        return self.result

    # -- spending --------------------------------------------------------------------------

    def _may_spend(self) -> bool:
        """True while a new prediction is allowed; records why not the first time."""
        if self.result.stopped is None:
            if self.result.spent >= self.budget:
                self.result.stopped = f"budget of {self.budget} predictions spent"
            elif self.stop is not None:
                self.result.stopped = self.stop(self.stats)
        return self.result.stopped is None

    def _visit(
        self, family: Space, label: str, build: Callable[[], InputSet]
    ) -> list[Observation] | None:
        """The observations of ``label`` (evaluated now unless seen); None once stopped."""
        if (family.name, label) in self.seen:
            return self.seen[(family.name, label)]
        if not self._may_spend():
            return None
        return self._evaluate(family, build())

    def _evaluate(self, family: Space, input_set: InputSet) -> list[Observation]:
        answer = self.evaluate(input_set)
        observations = [answer] if isinstance(answer, Observation) else (
            [Observation(answer)] if isinstance(answer, Verdict) else list(answer)
        )
        member = input_set.member
        self.seen[(family.name, member.label)] = observations
        self.result.spent += 1
        self.stats.evaluations += 1
        tally = self.result.families[family.name]
        tally.predictions += 1
        failing = [(o.key, o) for o in observations if o.key is not None]
        if failing:
            tally.failures += 1
            self.failures += 1
        for key, observation in failing:
            self._group(key, member, observation)
        if member.x is not None:
            self.points[family.name][member.x] = {key for key, _ in failing}
        if self.progress is not None:
            elapsed = max(self.clock() - self.started, 1e-9)
            self.progress(ExploreProgress(self.result.spent, self.budget, self.failures,
                                   len(self.groups), self.result.spent / elapsed, member.label))
        return observations

    def _group(self, key: GroupKey, member: Member, observation: Observation) -> None:
        message = observation.verdict.message
        group = self.groups.get(key)
        if group is None:
            self.groups[key] = FailureGroup.starting(key, observation.attribution,
                                                     observation.culprit, member, message)
        else:
            group.add(member, message)

    # -- guided probes -----------------------------------------------------------------------

    def _guide(self, family: Space | None) -> None:
        """Evaluate each guided boundary's fp16 neighbours: the largest value at or below
        it and the next one up (the first x where theory says the op has overflowed)."""
        if not isinstance(family, ParametricSpace) or not family.plan():
            return
        for boundary in self.guided:
            if not 0 < boundary.value < _FP16.largest:
                continue
            below, above = _FP16.straddle(boundary.value)
            outcome = GuidedOutcome(boundary, family.label_at(below), family.label_at(above))
            self.result.guided.append(outcome)
            seen = [self._visit(family, family.label_at(x), partial(family.inputs_at, x))
                    for x in (below, above)]
            if seen[0] is not None and seen[1] is not None:
                outcome.confirmed = bool(_keys(seen[1]) - _keys(seen[0]))
                self._localize_new(family)

    # -- cliffs ----------------------------------------------------------------------------

    def _localize_new(self, family: Space) -> None:
        """Localize every group that now has a pass/fail transition in ``family``."""
        if not isinstance(family, ParametricSpace):
            return
        points = self.points[family.name]
        for key in list(self.groups):
            if (family.name, key) in self.localized or self.result.stopped is not None:
                continue
            pair = _transition(points, key)
            if pair is not None:
                self.localized.add((family.name, key))
                self._localize(family, key, *pair)

    def _localize(self, family: ParametricSpace, key: GroupKey, a: float, b: float) -> None:
        def predict(x: float) -> list[Observation]:
            label = family.label_at(x)
            if (family.name, label) in self.seen:
                return self.seen[(family.name, label)]
            if self.localizing is not None:
                self.localizing -= 1
            return self._evaluate(family, family.inputs_at(x))

        def refused(x: float) -> bool:
            return (family.name, family.label_at(x)) not in self.seen and (
                self.localizing == 0 or not self._may_spend())

        def shown(observations: list[Observation]) -> Observation | None:
            matching = [o for o in observations if o.key == key or o.path == key.path]
            return next(iter(matching or observations), None)

        def describe(observations: list[Observation]) -> object:
            observation = shown(observations)
            return None if observation is None else observation.output

        def element(observations: list[Observation]) -> Element | None:
            failing = next((o for o in observations if o.key == key), None)
            return None if failing is None or not failing.arrays else breaking_element(
                failing.verdict)

        def describe_at(observations: list[Observation], at: Element) -> object:
            observation = shown(observations)
            return None if observation is None else read(observation.arrays, at).output

        spent = self.result.spent
        cliff = localize(predict, lambda found: key in _keys(found), min(a, b), max(a, b),
                         describe=describe, boundaries=self.guided, stop=refused,
                         element=element, describe_at=describe_at)
        if cliff is not None:
            self.result.cliffs.append(CliffFinding(
                family.name, key.signature, key.culprit, key.path, cliff=cliff,
                spent=self.result.spent - spent,
                stopped=None if cliff.ulps == 1 else self.result.stopped or (
                    LOCALIZATION_SPENT if self.localizing == 0 else None)))


def _keys(observations: list[Observation]) -> set[GroupKey]:
    return {o.key for o in observations if o.key is not None}


def _transition(points: dict[float, set[GroupKey]], key: GroupKey) -> tuple[float, float] | None:
    """The first x-neighbours (by |x|, one sign at a time, 0 on both sides) where
    ``key`` starts or stops failing."""
    for sign in (1.0, -1.0):
        side = sorted((x for x in points if x * sign >= 0), key=abs)
        for a, b in itertools.pairwise(side):
            if (key in points[a]) != (key in points[b]):
                return a, b
    return None


def _round_robin(plans: dict[str, list[str]]) -> Iterator[tuple[str, str]]:
    """(family, label): every family's first member, then every family's second, …"""
    for i in range(max(map(len, plans.values()), default=0)):
        for name, plan in plans.items():
            if i < len(plan):
                yield name, plan[i]

"""First divergence: the unit of a graph where a failure enters, and input cutting.

A :class:`Dag` is the dependency view of a graph of opaque units (ops, FX nodes);
:func:`first_divergence` bisects its topological order with a monotone check, and
:func:`locate_divergence` confirms the diverging unit by an isolated :class:`Cut`, with
ddmin (:mod:`nebisect.search.ddmin`) over a window of its ancestors when the unit alone
does not reproduce. Like ddmin, nothing here knows models, files or processes: the
caller injects the check and the test.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from nebisect.codec import Form, Record
from nebisect.search.ddmin import Evaluator, Reduction, ReductionStopped, ddmin


@dataclass
class OpError(Record):
    """One op's output error against the reference, in the divergence's unit: a step of
    the walk to the first op that breaks the oracle (non-finite errors as JSON strings)."""

    json_form: ClassVar[Form] = Form(strict_floats=True)

    index: int
    name: str
    op_type: str
    error: float
    passed: bool


@dataclass
class FirstDivergence:
    """Where a monotone check first turns true, and how many checks that took."""

    index: int | None
    checks: int


def first_divergence(count: int, broken: Callable[[int], bool]) -> FirstDivergence:
    """Binary search for the first position ``i`` in ``range(count)`` with ``broken(i)``.

    ``broken`` must be monotone (false … false true … true): use it with
    :meth:`Dag.frontier` — "some value live after position i breaks the oracle" — which
    is monotone for any error that propagates. The last position is checked first; if it
    is not broken, nothing diverges (``index`` None). ``1 + ceil(log2 count)`` checks.
    """
    if count <= 0:
        return FirstDivergence(None, 0)
    checks = 1
    if not broken(count - 1):
        return FirstDivergence(None, checks)
    low, high = -1, count - 1  # broken(high) holds; broken(low) is false (or low = -1)
    while high - low > 1:
        middle = (low + high) // 2
        checks += 1
        if broken(middle):
            high = middle
        else:
            low = middle
    return FirstDivergence(high, checks)


@dataclass(frozen=True)
class Cut:
    """A subgraph: its units in order, the values to feed it (recorded from a reference
    run) and the values it exposes as outputs."""

    units: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


class Dag:
    """The dependency view the algorithms consume: units in topological order, the
    values each unit reads and writes, and the graph's inputs and outputs.

    Values produced by no unit (graph inputs, or constants the adapter re-emits itself)
    are simply absent from ``produces``; only values listed here are cut.
    """

    def __init__(
        self,
        order: Sequence[str],
        consumes: Mapping[str, Sequence[str]],
        produces: Mapping[str, Sequence[str]],
        inputs: Sequence[str],
        outputs: Sequence[str],
    ) -> None:
        self.order = tuple(order)
        self.consumes = {u: tuple(consumes.get(u, ())) for u in self.order}
        self.produces = {u: tuple(produces.get(u, ())) for u in self.order}
        self.inputs = tuple(inputs)
        self.outputs = tuple(outputs)
        self.position = {u: i for i, u in enumerate(self.order)}
        self.producer = {v: u for u in self.order for v in self.produces[u]}
        last_use: dict[str, float] = {}
        for u in self.order:
            for v in self.consumes[u]:
                last_use[v] = self.position[u]
        for v in self.outputs:
            last_use[v] = math.inf
        self._lifetimes = [
            (self.position[u], last_use.get(v, self.position[u]), v)
            for u in self.order for v in self.produces[u]
        ]

    def frontier(self, index: int) -> list[str]:
        """Values live just after position ``index``: produced at or before it and read
        after it (or graph outputs). An error that entered at or before ``index`` and
        propagates is visible in one of them, which makes the check monotone."""
        return [v for born, dies, v in self._lifetimes if born <= index < dies]

    def ancestors(self, unit: str) -> list[str]:
        """Units ``unit`` depends on, nearest (latest in the order) first."""
        seen: set[str] = set()
        stack = [unit]
        while stack:
            for v in self.consumes[stack.pop()]:
                producer = self.producer.get(v)
                if producer is not None and producer not in seen:
                    seen.add(producer)
                    stack.append(producer)
        return sorted(seen, key=self.position.__getitem__, reverse=True)

    def cut(self, kept: Sequence[str] | set[str]) -> Cut:
        """Input cutting: the kept units, fed every value they read from outside the
        kept set (dropped producers' outputs and graph inputs), exposing every value they
        produce that no kept unit reads, plus kept graph outputs."""
        keep = set(kept)
        unknown = keep - self.position.keys()
        if unknown:
            raise KeyError(f"not units of this graph: {sorted(unknown)}")
        units = tuple(u for u in self.order if u in keep)
        inputs: dict[str, None] = {}
        read: set[str] = set()
        for u in units:
            for v in self.consumes[u]:
                read.add(v)
                if self.producer.get(v) not in keep:
                    inputs.setdefault(v)
        graph_outputs = set(self.outputs)
        outputs = tuple(
            v for u in units for v in self.produces[u] if v not in read or v in graph_outputs
        )
        return Cut(units, tuple(inputs), outputs)


@dataclass
class Localization:
    """First-divergence result: the diverging unit, the signature of its divergence, the
    cheap checks spent, and the confirmed reduction (None if no isolated cut of the
    diverging unit and its ancestors reproduced it — the caller falls back to ddmin)."""

    index: int | None
    unit: str | None
    signature: str | None
    checks: int
    reduction: Reduction[str] | None


def locate_divergence(
    dag: Dag, divergence: Callable[[str], str | None], evaluator: Evaluator[str]
) -> Localization:
    """First divergence from recorded intermediates, confirmed by isolated cuts.

    ``divergence(value)`` compares one value of ONE target run with ONE reference run
    and returns its mismatch signature (None when within tolerance); the search spends
    only these cheap checks. The diverging unit is then cut out alone (its inputs fed
    from the reference run) and tested in isolation for the same divergence signature —
    the signature where the bug enters, which is what a repro of that op shows. If the
    op alone does not reproduce, the window grows over its nearest ancestors (1, 2, 4, …
    units) and the first reproducing window is reduced with :func:`ddmin`. On a chain
    with one bad op this costs one isolated evaluation (plus re-checks).
    """
    found = first_divergence(
        len(dag.order), lambda i: any(divergence(v) for v in dag.frontier(i))
    )
    if found.index is None:
        return Localization(None, None, None, found.checks, None)
    unit = dag.order[found.index]
    signature = next(s for v in dag.produces[unit] if (s := divergence(v)))
    ancestors = dag.ancestors(unit)
    width = 1
    try:
        while True:
            window = sorted([unit, *ancestors[: width - 1]], key=dag.position.__getitem__)
            if evaluator.interesting(window, signature):
                break
            if width > len(ancestors):
                return Localization(found.index, unit, signature, found.checks, None)
            width = min(2 * width, len(ancestors) + 1)
    except ReductionStopped:
        return Localization(found.index, unit, signature, found.checks, None)
    if len(window) == 1:
        reduction = Reduction(window, signature, evaluator.stats, True, "first-divergence")
    else:
        reduction = ddmin(window, evaluator, signature)
        reduction.strategy = "first-divergence+ddmin"
    return Localization(found.index, unit, signature, found.checks, reduction)

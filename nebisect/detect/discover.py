"""Explore one target of a run: the ``evaluate`` the discovery engine calls, run side.

The engine (:mod:`nebisect.search.explore`) knows no model; here one budget unit is one
input set evaluated on every conversion path of the target (one isolated prediction per
path, on the :class:`~nebisect.evaluate.workbench.Workbench`), each a
:class:`~nebisect.detect.findings.Row`. Every failing input set is attributed (its
probes are cached across targets): one op can be a conversion bug at one input and a
precision hazard at another, and those are two groups. The culprit op is located the
first time a (path, signature, attribution) shows up on this target and keys its group:
locating it costs a prediction recording every intermediate, which a cliff's
localization would otherwise pay at every failing probe. An input set the reference
fails on (torch cannot compute the expected outputs) is not judged: a ``skipped`` row,
not a finding of the target's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nebisect.detect import DEFAULT_BUDGET
from nebisect.detect.attribution import Attributor
from nebisect.detect.findings import Row
from nebisect.evaluate.judge import split_arrays
from nebisect.evaluate.workbench import CellKey, reference_failure
from nebisect.inputs.families import Family, InputSet
from nebisect.search.cliff import Boundary
from nebisect.search.ddmin import Stop
from nebisect.search.explore import ExploreProgress, explore
from nebisect.search.plan import TimeBudget
from nebisect.search.readout import Element, read
from nebisect.search.records import Culprit, Exploration, Observation
from nebisect.targets.spec import TargetSpec
from nebisect.verdict import Status, Verdict


@dataclass
class Discovery:
    """How ``run`` explores: a prediction budget per target, the value families (None:
    all), the seed, the targets to explore (None: every target of the run), whether
    a target's exploration ends at its first failure (``bisect`` wants one trigger, not
    a survey; a failure among the input sets every run evaluates ends it before it
    starts), and the run's time budget the exploration is planned to fit
    (:mod:`nebisect.search.plan`; ``run --time-budget``, or a default one that applies
    when a prediction is expensive; None: the whole ``budget`` whatever it costs, as
    ``bisect``'s trigger search wants)."""

    budget: int = DEFAULT_BUDGET
    families: list[str] | None = None
    seed: int = 0
    targets: list[TargetSpec] | None = None
    first_failure: bool = False
    timer: TimeBudget | None = None


def explore_target(
    attributor: Attributor, target: TargetSpec, paths: Sequence[str], families: Sequence[Family], *,
    budget: int, guided: Sequence[Boundary], rows: list[Row],
    progress: Callable[[ExploreProgress], None] | None = None, stop: Stop | None = None,
    localize: int | None = None, locate: Callable[[], bool] = lambda: True,
) -> Exploration:
    """Spend ``budget`` predictions on ``target`` (less when ``stop`` says so; at most
    ``localize`` of them bisecting cliffs); every evaluation is appended to ``rows``.
    A failure's culprit op is searched for while ``locate()`` says there is time."""
    bench, name = attributor.bench, str(target)
    located: dict[tuple[str, str, str], Culprit | None] = {}

    def evaluate(input_set: InputSet) -> list[Observation]:
        npz = bench.save_inputs(input_set.arrays, input_set.label)
        observations = []
        for path in paths:
            verdict, arrays = bench.evaluate_cell(target, path, npz)
            row = Row(name, 0, verdict, path=path, input_set=input_set.member, explored=True)
            rows.append(row)
            if reference_failure(verdict):
                row.verdict = Verdict(Status.SKIPPED, verdict.stage, target=name,
                                      message=f"not judged: the reference failed "
                                      f"({verdict.signature})")
                observations.append(Observation(row.verdict, path=path, target=name))
                continue
            if verdict.failed:
                cell = CellKey(target, path, npz)
                row.attribution = attributor.attribution(cell, verdict)
                key = (path, verdict.signature, row.attribution)
                if key not in located and locate():
                    located[key] = attributor.explain(cell, verdict)[1]
                row.culprit = located.get(key)
            observations.append(Observation(verdict, row.culprit, path, first_value(arrays),
                                            arrays, row.attribution, name))
        return observations

    return explore(evaluate, families, budget=budget, guided=guided, progress=progress,
                   stop=stop, localize=localize)


def first_value(arrays: dict[str, np.ndarray], prefix: str = "out:") -> float | None:
    """The first element of the first output (what a cliff report shows on each side);
    ``prefix`` ``ref:`` reads the reference's instead."""
    outputs = split_arrays(arrays, prefix)
    for name in sorted(outputs):
        if outputs[name].size:
            return float(np.asarray(outputs[name], dtype=np.float64).reshape(-1)[0])
    return None


def values_at(arrays: Mapping[str, np.ndarray],
              element: Mapping[str, Any] | None) -> tuple[float | None, float | None]:
    """(target, reference) at a cliff's ``element`` (``Cliff.element``: where its failing
    side breaks), or at the first element of the first output when it has none."""
    if element is None:
        return first_value(dict(arrays)), first_value(dict(arrays), "ref:")
    reading = read(arrays, Element.from_dict(element))
    return reading.output, reading.reference

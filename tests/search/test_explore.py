"""The discovery engine against fake devices (pure functions of the input arrays).

The fakes mimic the published Neural Engine cliffs: seed 000's reduce_log_sum_exp over
32 equal channels collapses once max(x) > log(65504/32), softplus once x > ln 2^15.
Starting from seed 000's benign example (x = 2.5), the engine must find the collapse,
pin it to two adjacent fp16 values, spend exactly its budget, and say the same thing
for the same seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from nebisect.inputs.families import InputSet, ModelInputs, build
from nebisect.search.cliff import Boundary
from nebisect.search.ddmin import Budget
from nebisect.search.explore import LOCALIZATION_SPENT, ExploreProgress, explore
from nebisect.search.records import Culprit, Exploration, Observation, culprit_key
from nebisect.sources.inputs import InputDescription
from nebisect.verdict import Verdict

LSE_CLIFF = math.log(65504 / 32)  # 7.6241
SOFTPLUS_CLIFF = 15 * math.log(2.0)  # 10.3972
COLLAPSE = "mismatch:collapse"


def seed000(example: float = 2.5) -> ModelInputs:
    shape = (1, 1, 8, 8)
    return ModelInputs([InputDescription("x", "float32", [(n, n) for n in shape])],
                       example={"x": np.full(shape, example, dtype=np.float32)})


def at(op_type: str) -> Culprit:
    """The culprit an evaluate names: ``op_type`` (the engine only groups by it)."""
    return Culprit(op_type.replace("_", ""), op_type, "", "")


def key_of(op_type: str, attribution: str = "device") -> str:
    """The culprit key groups and cliffs of :func:`at`'s culprit carry."""
    return culprit_key(attribution, at(op_type))


def collapsing_above(threshold: float, culprit: str = "reduce_log_sum_exp",
                     path: str = "export") -> Callable[[InputSet], Observation]:
    """A fake device: collapse (output 0.0) once max(x) > threshold, else the true value."""

    def device(input_set: InputSet) -> Observation:
        x = input_set.arrays["x"].astype(np.float64)
        peak = float(np.max(x)) if not np.isnan(x).any() else math.nan
        if peak > threshold:
            return Observation(Verdict("mismatch", signature=COLLAPSE), at(culprit), path, 0.0,
                               attribution="device")
        return Observation(Verdict("pass"), output=peak + math.log(32))

    return device


class Counting:
    """Counts the calls of a wrapped evaluate and keeps the labels, in order."""

    def __init__(self, evaluate: Callable[[InputSet], object]) -> None:
        self.evaluate, self.labels = evaluate, list[str]()

    def __call__(self, input_set: InputSet) -> object:
        self.labels.append(input_set.label)
        return self.evaluate(input_set)


def run(evaluate: Callable[[InputSet], object], budget: int = 300, seed: int = 0,
        **options: object) -> Exploration:
    return explore(evaluate, build(seed000(), seed=seed), budget=budget, **options)  # type: ignore[arg-type]


def test_seed000_collapse_found_from_a_benign_start_and_pinned_to_adjacent_fp16() -> None:
    result = run(collapsing_above(LSE_CLIFF))
    const = next(c for c in result.cliffs if c.family == "const")
    assert (const.cliff.lo, const.cliff.hi) == (7.62109375, 7.625)
    assert const.complete and not const.cliff.lo_fails
    assert const.spent <= 20
    assert const.cliff.lo_output == pytest.approx(7.62109375 + math.log(32))
    assert const.cliff.hi_output == 0.0
    assert (const.signature, const.culprit, const.path) == (COLLAPSE,
                                                            key_of("reduce_log_sum_exp"),
                                                            "export")
    [group] = result.groups
    assert group.smallest.label == "const(x=7.625)"  # shrunk within its family
    assert group.smallest.magnitude == 7.625


def test_softplus_like_collapse_is_pinned_to_its_published_fp16_pair() -> None:
    result = run(collapsing_above(SOFTPLUS_CLIFF, culprit="softplus"))
    const = next(c for c in result.cliffs if c.family == "const")
    assert (const.cliff.lo, const.cliff.hi) == (10.390625, 10.3984375)
    assert const.spent <= 20 and const.culprit == key_of("softplus")


def test_guided_probe_is_evaluated_first_and_confirms_the_cliff_for_free() -> None:
    calls = Counting(collapsing_above(LSE_CLIFF))
    boundary = Boundary("log(65504/32)", LSE_CLIFF, "Σexp(x) overflows fp16")
    result = run(calls, budget=40, guided=[boundary])
    assert calls.labels[:2] == ["const(x=7.62109375)", "const(x=7.625)"]
    [guided] = result.guided
    assert guided.confirmed is True and guided.above == "const(x=7.625)"
    const = result.cliffs[0]
    assert const.family == "const" and const.spent == 0 and const.cliff.predictions == 2
    assert const.cliff.predicted is not None and const.cliff.predicted["label"] == "log(65504/32)"


def test_a_refuted_guided_probe_says_so() -> None:
    result = run(collapsing_above(100.0), budget=10,
                 guided=[Boundary("log(65504/32)", LSE_CLIFF)])
    assert result.guided[0].confirmed is False


@pytest.mark.parametrize("budget", [0, 1, 7, 25, 60])
def test_the_budget_is_spent_exactly_and_the_rest_is_listed_unexplored(budget: int) -> None:
    calls = Counting(collapsing_above(LSE_CLIFF))
    result = run(calls, budget=budget)
    assert len(calls.labels) == result.spent == budget
    assert len(set(calls.labels)) == budget
    assert result.stopped == f"budget of {budget} predictions spent"
    assert sum(t.predictions for t in result.families.values()) == budget
    for name, tally in result.families.items():
        evaluated = {label for label in calls.labels if label.startswith(name)}
        assert set(tally.unexplored).isdisjoint(evaluated)
    assert sum(len(t.unexplored) for t in result.families.values()) > 0


def test_a_small_budget_touches_every_applicable_family_first() -> None:
    calls = Counting(collapsing_above(1e9))
    result = run(calls, budget=8)
    touched = [name for name, tally in result.families.items() if tally.predictions]
    assert touched == ["const", "normal", "spike", "special", "zeros", "signed", "tiny",
                       "integers"]


def test_a_budget_that_ends_inside_localization_keeps_the_bracket_reached() -> None:
    def const_only(budget: int) -> Exploration:
        return explore(collapsing_above(LSE_CLIFF), build(seed000(), ["const"]), budget=budget)

    # const(1) passes, const(-1) passes, const(32768) collapses: localization starts
    # after three predictions and needs 14 more; with none left, the bracket is the
    # exploration's own.
    unlocalized = const_only(3).cliffs[0]
    assert (unlocalized.cliff.lo, unlocalized.cliff.hi, unlocalized.spent) == (1.0, 32768.0, 0)
    assert not unlocalized.complete and const_only(17).cliffs[0].complete
    cliff = const_only(8).cliffs[0]
    assert cliff.spent == 5 and not cliff.complete and cliff.cliff.ulps > 1
    assert cliff.cliff.lo < LSE_CLIFF < cliff.cliff.hi
    assert cliff.cliff.probes[0]["x"] == 1.0


def test_localization_within_its_share_leaves_the_rest_to_the_families() -> None:
    """A plan's share of localization (``localize``): the const cliff's bisection (14
    predictions after the first three) stops after 5, says why, and the rest of the
    budget goes to the family's members."""
    def const_only(**options: Any) -> tuple[Exploration, Counting]:
        calls = Counting(collapsing_above(LSE_CLIFF))
        return explore(calls, build(seed000(), ["const"]), budget=20, **options), calls

    (capped, calls), (whole, _) = const_only(localize=5), const_only()
    (cliff,) = capped.cliffs
    assert cliff.spent == 5 and not cliff.complete and cliff.stopped == LOCALIZATION_SPENT
    assert capped.spent == len(calls.labels) == 20
    assert capped.families["const"].predictions == 20
    (complete,) = whole.cliffs
    assert complete.complete and complete.spent == 14 and complete.stopped is None


def test_same_seed_same_result_json_and_the_record_round_trips() -> None:
    first = run(collapsing_above(LSE_CLIFF), budget=150, seed=4).to_json()
    again = run(collapsing_above(LSE_CLIFF), budget=150, seed=4).to_json()
    assert first == again
    assert Exploration.from_json(first).to_json() == first


def test_failures_with_one_key_form_one_group_listing_every_family() -> None:
    def device(input_set: InputSet) -> Observation:
        x = input_set.arrays["x"]
        if input_set.member.family in ("const", "spike") and np.max(x) > 100:
            return Observation(Verdict("mismatch", signature=COLLAPSE), at("reduce_log_sum_exp"))
        return Observation(Verdict("pass"))

    result = run(device, budget=200)
    [group] = result.groups
    assert sorted(group.families) == ["const", "spike"]
    failing = group.members
    assert group.smallest == min(failing, key=lambda m: (m.magnitude, m.label))
    assert group.smallest.magnitude == min(m.magnitude for m in failing) < 101
    assert len({m.label for m in failing}) == len(failing) > 10


def test_groups_are_split_by_conversion_path_and_culprit() -> None:
    def two_paths(input_set: InputSet) -> list[Observation]:
        peak = float(np.nanmax(input_set.arrays["x"])) if not np.isnan(
            input_set.arrays["x"]).all() else 0.0
        trace = Verdict("mismatch", signature="mismatch:tolerance") if peak > 1000 else (
            Verdict("pass"))
        export = Verdict("error", signature="error:predict:boom") if peak > 20000 else (
            Verdict("pass"))
        return [Observation(export, at("gather"), "export", attribution="conversion"),
                Observation(trace, at("mul"), "trace", attribution="precision")]

    result = run(two_paths, budget=200)
    keys = {(g.signature, g.attribution, g.culprit and g.culprit.op_type, g.path)
            for g in result.groups}
    assert keys == {("mismatch:tolerance", "precision", "mul", "trace"),
                    ("error:predict:boom", "conversion", "gather", "export")}
    trace = next(c for c in result.cliffs if c.family == "const" and c.path == "trace")
    assert trace.cliff.lo <= 1000 < trace.cliff.hi and trace.complete


def test_a_plain_verdict_is_accepted_and_an_injected_stop_ends_the_search() -> None:
    calls = Counting(lambda s: Verdict("pass"))
    result = run(calls, budget=100, stop=Budget(max_evals=12))
    assert result.spent == len(calls.labels) == 12
    assert result.stopped == "evaluation budget of 12 spent" and result.groups == []


def test_progress_reports_every_prediction_with_failures_so_far() -> None:
    seen: list[ExploreProgress] = []
    ticks = iter(float(t) for t in range(10_000))
    result = run(collapsing_above(LSE_CLIFF), budget=30, progress=seen.append,
                 clock=lambda: next(ticks))
    assert [p.spent for p in seen] == list(range(1, 31))
    assert seen[-1].failures == sum(t.failures for t in result.families.values()) > 0
    assert all(p.budget == 30 and p.rate > 0 for p in seen)
    assert seen[0].label == "const(x=1.0)"


def elementwise_collapse(threshold: float) -> Callable[[InputSet], Observation]:
    """A fake device judged as ``run`` judges: every element of x above ``threshold``
    collapses to 0.0 on its own (a spatial position's logsumexp), the verdict is
    ``compare``'s, and the observation carries its arrays and the first output value."""
    from nebisect.oracle import compare
    from nebisect.verdict import ErrorMetrics

    def device(input_set: InputSet) -> Observation:
        x = input_set.arrays["x"].astype(np.float64)
        reference = x + math.log(32)
        output = np.where(x > threshold, 0.0, reference)
        comparison = compare("y", reference, output, "fp16")
        verdict = Verdict("pass") if comparison.passed else Verdict(
            "mismatch", signature=f"mismatch:{comparison.kind}",
            error_metrics=ErrorMetrics.over([comparison]))
        arrays = {"out:y": output, "ref:y": reference}
        return Observation(verdict, at("reduce_log_sum_exp"), "export",
                           float(output.reshape(-1)[0]), arrays)

    return device


def test_a_cliff_shows_both_sides_at_the_element_that_breaks() -> None:
    # Before: each side showed the first output element, untouched by a scaled normal's
    # collapse of its largest element, so the cliff printed 3.47852 | 3.47852.
    result = run(elementwise_collapse(LSE_CLIFF), budget=60)
    normal = next(c for c in result.cliffs if c.family == "normal")
    assert normal.complete
    cliff = normal.cliff
    failing, passing = (cliff.lo_output, cliff.hi_output) if cliff.lo_fails else (
        cliff.hi_output, cliff.lo_output)
    assert failing == 0.0 and passing == pytest.approx(LSE_CLIFF + math.log(32), abs=0.02)
    assert cliff.element is not None and cliff.element["output"] == "y"
    assert normal.stopped is None


def test_a_bisection_cut_short_says_why() -> None:
    # Before: the record kept the bracket without the reason the search stopped.
    result = explore(collapsing_above(LSE_CLIFF), build(seed000(), ["const"]), budget=8)
    [cliff] = result.cliffs
    assert not cliff.complete and cliff.stopped == "budget of 8 predictions spent"
    assert type(cliff).from_dict(cliff.to_dict()).stopped == cliff.stopped

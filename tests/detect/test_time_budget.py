"""A run under a time budget (:mod:`nebisect.search.plan`), on a clock that moves 8 s per
prediction: it plans its exploration from the matrix predictions' cost, stops starting
new work when the budget is spent, and its report (JSON, text, HTML summary) says what
was left unexplored. The one-op log-sum-exp package fails on the Neural Engine from
x ≈ 7.62, so exploration has something to find; the seconds are the fake clock's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import nebisect.detect.matrix as matrix
import nebisect.evaluate.workbench as workbench
from nebisect.detect.discover import Discovery
from nebisect.detect.matrix import MatrixRunner, RunReport
from nebisect.detect.report import run_payload
from nebisect.detect.run_console import print_run
from nebisect.executors.runner import Runner
from nebisect.isolate import Isolator
from nebisect.search.plan import (
    CULPRIT_PREDICTIONS,
    CULPRIT_RESERVE,
    DEFAULT_TIME_BUDGET,
    TimeBudget,
)
from nebisect.search.space import InputSet
from nebisect.sources.resolve import resolve_source
from nebisect.targets.spec import TargetSpec

#: the fake cost of one prediction (ResNet-50's under the simulator)
PREDICTION = 8.0
TARGETS = [TargetSpec.parse("sim:fp16"), TargetSpec.parse("sim:ane")]


class PredictionClock:
    """Seconds that move by :data:`PREDICTION` whenever a cell is evaluated."""

    def __init__(self) -> None:
        self.now = 0.0
        self.predictions = 0

    def __call__(self) -> float:
        return self.now


def _run(package: Path, tmp_path: Path, isolator: Isolator, monkeypatch: pytest.MonkeyPatch,
         time_budget: float | None, cost: float = PREDICTION, later: float | None = None,
         budget: int = 40, default: bool = True) -> tuple[RunReport, PredictionClock]:
    """The run, each prediction costing ``cost`` seconds (``later``: those after the
    matrix's first two), exploring ``budget`` units under ``time_budget``, else (as
    ``run`` does, unless not ``default``) under the default an expensive model gets."""
    clock = PredictionClock()
    evaluate_together = workbench.evaluate_together

    def costly(case: Any, beside: Any, **kwargs: Any) -> Any:
        costs = []
        for _ in range(1 + len(beside)):  # cells judged together cost as much as apart
            costs.append(cost if later is None or clock.predictions < len(TARGETS) else later)
            clock.now += costs[-1]
            clock.predictions += 1
        outcomes = evaluate_together(case, beside, **kwargs)
        for outcome, spent in zip(outcomes, costs, strict=True):
            outcome.verdict.timings.reference = 0.0  # the fake cost is the whole cell's
            if outcome is not outcomes[0]:
                outcome.verdict.timings.wall = spent
        return outcomes

    monkeypatch.setattr(workbench, "evaluate_together", costly)
    timer = TimeBudget(time_budget or DEFAULT_TIME_BUDGET, clock,
                       default=time_budget is None) if time_budget or default else None
    runner = MatrixRunner(resolve_source(str(package)), list(TARGETS), tmp_path,
                          Runner(isolator=isolator),
                          discovery=Discovery(budget, ["const", "normal"], 0, list(TARGETS),
                                              timer=timer), clock=clock)
    return runner.run((1,)), clock


def test_the_plan_fits_the_budget_and_says_what_was_left(
        lse: Path, tmp_path: Path, isolator: Isolator,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two targets at 8 s, 4 minutes: the matrix costs 16 s; the culprit reserve
    2 × 2 targets × 3 × 8 s = 96 s; ⌊(240 - 16 - 96) / 16⌋ = 8 units per target."""
    report, clock = _run(lse, tmp_path, isolator, monkeypatch, 240.0)
    note = report.time_budget
    assert note is not None and not note.default
    assert (note.prediction_seconds, note.planned, note.budget) == (PREDICTION, 8, 40)
    spent = {target: e.spent for target, e in report.explorations.items()}
    assert spent == {"sim:fp16": 8, "sim:ane": 8}
    assert note.skipped == {"sim:fp16": 32, "sim:ane": 32} and note.unexplored_targets == []
    assert len([r for r in report.rows if r.explored]) == 16
    # the matrix, the plan, and the Neural Engine's failure explained (attribution
    # probe and culprit search) within the reserve
    assert 18 <= clock.predictions <= 18 + CULPRIT_RESERVE * CULPRIT_PREDICTIONS
    assert clock.now <= 240.0
    # the collapse is found and its cliff localized within the plan
    (finding,) = report.findings
    assert finding.attribution == "device"
    (cliff,) = [c for e in report.explorations.values() for c in e.cliffs if c.family == "const"]
    assert cliff.cliff.ulps == 1
    said = report.to_dict()["time_budget"]
    assert said["planned"] == 8 and said["skipped"] == note.skipped
    summary = run_payload(report).summary
    assert summary["time budget"] == "time budget 4m (--time-budget)"
    assert summary["planned exploration"].startswith("8 of 40 predictions per target")
    assert summary["predictions not made"] == ", ".join(
        f"{t} {40 - n}" for t, n in spent.items())


def test_a_model_slower_than_measured_stops_when_the_budget_is_spent(
        lse: Path, tmp_path: Path, isolator: Isolator,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Planned from 8 s, every later prediction takes 40 s: the 8 units do not fit, and
    no prediction starts once the 4 minutes are spent."""
    report, clock = _run(lse, tmp_path, isolator, monkeypatch, 240.0, later=40.0)
    note = report.time_budget
    assert note is not None and note.planned == 8
    stopped = {target: e.stopped for target, e in report.explorations.items()}
    assert "time budget of 4m spent" in stopped.values()
    assert note.note.endswith("; time budget of 4m spent")
    spent = {target: e.spent for target, e in report.explorations.items()}
    assert sum(spent.values()) < 16
    assert note.skipped == {target: 40 - n for target, n in spent.items()}
    # the last prediction started before the budget was spent
    assert clock.now - 40.0 < 240.0


def test_nothing_left_explores_nothing_and_says_so(
        lse: Path, tmp_path: Path, isolator: Isolator, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    report, clock = _run(lse, tmp_path, isolator, monkeypatch, 20.0)
    assert clock.predictions == 2  # the matrix: one input set on each target
    assert report.explorations == {} and not report.failed
    note = report.time_budget
    assert note is not None and note.planned == 0
    assert note.unexplored_targets == ["sim:fp16", "sim:ane"]
    assert note.skipped == {"sim:fp16": 40, "sim:ane": 40}
    assert note.lines()[0].endswith("(no exploration fits the 4s left)")
    monkeypatch.setenv("COLUMNS", "400")
    print_run(report, None)
    printed = capsys.readouterr().out
    assert "time budget 20s (--time-budget): planned 0 of 40 exploration predictions" in printed
    assert "not explored within the budget: sim:fp16, sim:ane" in printed


def test_an_expensive_model_gets_the_default_budget(
        lse: Path, tmp_path: Path, isolator: Isolator,
        monkeypatch: pytest.MonkeyPatch) -> None:
    report, _ = _run(lse, tmp_path, isolator, monkeypatch, None, cost=60.0)
    note = report.time_budget
    assert note is not None and note.default and note.seconds == DEFAULT_TIME_BUDGET
    assert "--time-budget DURATION sets another" in note.words
    assert run_payload(report).summary["time budget"] == note.words


def test_a_cheap_model_has_no_time_budget(
        lse: Path, tmp_path: Path, isolator: Isolator,
        monkeypatch: pytest.MonkeyPatch) -> None:
    report, _ = _run(lse, tmp_path, isolator, monkeypatch, None, cost=0.1)
    assert report.time_budget is None and "time_budget" not in report.to_dict()
    assert "time budget" not in run_payload(report).summary


def test_without_a_default_an_expensive_model_spends_the_whole_budget(
        lse: Path, tmp_path: Path, isolator: Isolator,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``bisect``'s trigger search has no default budget: it wants a trigger."""
    report, _ = _run(lse, tmp_path, isolator, monkeypatch, None, cost=60.0, budget=3,
                     default=False)
    assert report.time_budget is None
    assert {target: e.spent for target, e in report.explorations.items()} == {
        "sim:fp16": 3, "sim:ane": 3}


@pytest.fixture
def two_input_sets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The matrix starts from two input sets: the package's own and a copy of it."""
    original = matrix.base_input_sets

    def two(*args: Any, **kwargs: Any) -> list[InputSet]:
        (first,) = original(*args, **kwargs)
        return [first, replace(first, member=replace(first.member, label="static again"))]

    monkeypatch.setattr(matrix, "base_input_sets", two)


@pytest.mark.usefixtures("two_input_sets")
def test_a_spent_budget_leaves_the_matrix_later_input_sets_unevaluated(
        lse: Path, tmp_path: Path, isolator: Isolator,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first input set gives every target its verdict (16 s of a 10 s budget); the
    second is not evaluated, and the report names it."""
    report, clock = _run(lse, tmp_path, isolator, monkeypatch, 10.0)
    assert clock.predictions == 2
    assert {row.input_set.label for row in report.rows} == {"static"}
    note = report.time_budget
    assert note is not None and note.unevaluated_sets == ["static again"]
    assert "  input sets not evaluated within the budget: static again" in note.lines()
    assert report.to_dict()["time_budget"]["unevaluated_sets"] == ["static again"]
    assert run_payload(report).summary["input sets not evaluated"] == "static again"


@pytest.mark.usefixtures("two_input_sets")
@pytest.mark.parametrize(("time_budget", "cost"), [(240.0, PREDICTION), (None, 0.1)])
def test_the_matrix_evaluates_every_input_set_while_time_is_left(
        lse: Path, tmp_path: Path, isolator: Isolator, monkeypatch: pytest.MonkeyPatch,
        time_budget: float | None, cost: float) -> None:
    """Time left in a given budget, or a cheap model (no default budget): both sets."""
    report, _ = _run(lse, tmp_path, isolator, monkeypatch, time_budget, cost=cost,
                     budget=0)
    labels = [row.input_set.label for row in report.rows if not row.explored]
    assert {"static", "static again"} <= set(labels)
    assert report.time_budget is None or report.time_budget.unevaluated_sets == []

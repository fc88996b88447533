"""The planner's choices given fake costs (:mod:`nebisect.search.plan`): no model, no
clock but the one handed in."""

from __future__ import annotations

import pytest

from nebisect.errors import NebisectError
from nebisect.options.parsers import parse_duration
from nebisect.search.cliff import Boundary
from nebisect.search.plan import (
    CULPRIT_PREDICTIONS,
    CULPRIT_RESERVE,
    BudgetNote,
    TimeBudget,
    duration_words,
    eta,
    plan,
    ranked_boundaries,
)

THREE = {"sim:fp32": 1.0, "sim:fp16": 1.0, "sim:ane": 1.0}
TWO_PATHS = dict.fromkeys(THREE, 2)


class FakeClock:
    """Seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_no_time_budget_is_the_whole_budget() -> None:
    chosen = plan(None, THREE, budget=40, paths=TWO_PATHS)
    assert (chosen.explore, chosen.localize, chosen.guided, chosen.constrained) == (
        40, 40, None, False)
    assert chosen.note == "" and chosen.skipped == 0


def test_a_cheap_model_gets_the_full_budget_within_a_time_budget() -> None:
    cheap = dict.fromkeys(THREE, 0.05)
    chosen = plan(300.0, cheap, budget=40, paths=TWO_PATHS)
    assert chosen.explore == 40 and not chosen.constrained
    # 40 units × (3 targets × 2 paths × 0.05 s) + the culprit reserve 2 × 3 × 3 × 0.05 s
    assert chosen.seconds == pytest.approx(40 * 0.3 + 0.9)


def test_eight_seconds_a_prediction_in_two_minutes_keeps_the_culprit_search() -> None:
    """ResNet-50 on one target and one path: 8 s a prediction, 2 minutes left. The
    culprit reserve (2 searches × 3 predictions × 8 s = 48 s) comes first, then
    ⌊72 / 8⌋ = 9 units, half of them at most localizing, two guided boundaries."""
    chosen = plan(120.0, {"sim:fp16": 8.0}, budget=40, paths={"sim:fp16": 1})
    assert chosen.culprits == CULPRIT_RESERVE
    assert (chosen.explore, chosen.localize, chosen.guided) == (9, 4, 2)
    assert chosen.skipped == 31 and chosen.constrained
    assert chosen.note == "9 of 40 predictions per target fit the 2m left"
    assert chosen.seconds == pytest.approx(9 * 8.0 + CULPRIT_RESERVE * CULPRIT_PREDICTIONS * 8.0)


def test_targets_explored_at_once_share_the_wall_time() -> None:
    """Three targets on two paths at 8 s: one unit costs 48 s of predictions, 24 s of
    wall on two jobs; the reserve 144 s of predictions, 72 s of wall."""
    costs = dict.fromkeys(THREE, 8.0)
    one = plan(600.0, costs, budget=40, paths=TWO_PATHS, jobs=1)
    two = plan(600.0, costs, budget=40, paths=TWO_PATHS, jobs=2)
    assert (one.explore, two.explore) == ((600 - 144) // 48, (600 - 72) // 24)


def test_the_reference_of_a_new_input_set_is_paid_once_a_unit() -> None:
    """One target at 1 s on one path, the reference 1 s: a unit costs 2 s."""
    chosen = plan(26.0, {"sim:fp16": 1.0}, budget=40, paths={"sim:fp16": 1}, reference=1.0)
    assert chosen.explore == (26 - CULPRIT_RESERVE * CULPRIT_PREDICTIONS) // 2


def test_nothing_left_explores_nothing_and_says_so() -> None:
    chosen = plan(-5.0, {"sim:fp16": 8.0}, budget=40, paths={"sim:fp16": 1})
    assert (chosen.explore, chosen.localize, chosen.guided, chosen.culprits) == (0, 0, 0, 0)
    assert chosen.note == "no exploration fits the 0s left"
    # time for one culprit search, none for exploring
    some = plan(30.0, {"sim:fp16": 8.0}, budget=40, paths={"sim:fp16": 1})
    assert (some.explore, some.culprits) == (0, 1)


def test_the_time_budget_reads_the_clock_it_is_given() -> None:
    clock = FakeClock()
    budget = TimeBudget(90.0, clock)
    clock.now += 60
    assert (budget.spent(), budget.left(), budget.stop()) == (60.0, 30.0, None)
    clock.now += 30
    assert budget.stop() == "time budget of 1m 30s spent"


def test_the_note_says_the_default_how_to_change_it_and_what_was_left() -> None:
    note = BudgetNote(480.0, True, 8.2, 130.0, 9, 40, note="9 of 40 predictions per target "
                      "fit the 4m left")
    note.account({"sim:fp16": 9, "sim:ane": 0}, "time budget of 8m spent")
    assert note.skipped == {"sim:fp16": 31, "sim:ane": 40}
    assert note.unexplored_targets == ["sim:ane"]
    assert note.lines() == [
        "time budget 8m (default for a model whose prediction takes 8.2 s (over 1 s); "
        "--time-budget DURATION sets another (e.g. --time-budget 30m)): planned 9 of 40 "
        "exploration predictions per target (9 of 40 predictions per target fit the 4m "
        "left; time budget of 8m spent)",
        "  not explored within the budget: sim:ane",
        "  predictions not made within the budget: sim:fp16 31, sim:ane 40"]
    assert BudgetNote.from_dict(note.to_dict()) == note
    given = BudgetNote(120.0, False, 8.2, 130.0, 9, 40)
    assert given.words == "time budget 2m (--time-budget)" and given.change == ""


def test_guided_boundaries_smallest_first() -> None:
    found = [Boundary("65504", 65504.0), Boundary("log(65504/32)", 7.62), Boundary("256", 256.0)]
    assert [b.value for b in ranked_boundaries(found)] == [7.62, 256.0, 65504.0]


def test_eta_and_words() -> None:
    assert eta(3, 9, 8.0) == 48.0 and eta(12, 9, 8.0) == 0.0
    assert [duration_words(s) for s in (480, 90, 42.4, 3900, 0)] == [
        "8m", "1m 30s", "42s", "1h 5m", "0s"]


@pytest.mark.parametrize(("text", "seconds"), [
    ("5m", 300.0), ("90s", 90.0), ("1h30m", 5400.0), ("1m 30s", 90.0), ("120", 120.0),
    ("2.5m", 150.0), (" 8M ", 480.0), (None, None), ("", None)])
def test_durations(text: str | None, seconds: float | None) -> None:
    assert parse_duration("--time-budget", text) == seconds


@pytest.mark.parametrize("text", ["soon", "5x", "0s", "-3m", "m"])
def test_bad_durations_are_one_line(text: str) -> None:
    with pytest.raises(NebisectError, match=r"--time-budget"):
        parse_duration("--time-budget", text)

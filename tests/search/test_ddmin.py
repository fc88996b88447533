"""The reduction algorithms against pure-Python predicates (no ML anywhere)."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pytest

from nebisect.search.ddmin import (
    Budget,
    Evaluator,
    ReductionError,
    ddmin,
    hierarchical_ddmin,
    signature_of,
)


def needs(*culprits: int, signature: str = "sig:A"):
    """A test that fails with ``signature`` iff all culprits are in the candidate."""

    def test(units: Sequence[int]) -> str | None:
        return signature if set(culprits) <= set(units) else None

    return test


def test_signature_of() -> None:
    class VerdictLike:
        def __init__(self, failed: bool, signature: str) -> None:
            self.failed, self.signature = failed, signature

    assert signature_of(VerdictLike(True, "crash:SIGSEGV")) == "crash:SIGSEGV"
    assert signature_of(VerdictLike(False, "pass")) is None
    assert signature_of("mismatch:collapse") == "mismatch:collapse"
    assert signature_of(None) is None


def test_ddmin_one_culprit() -> None:
    evaluator = Evaluator(needs(42), confirm=0)
    result = ddmin(list(range(100)), evaluator)
    assert result.units == [42]
    assert result.signature == "sig:A"
    assert result.complete and result.stopped is None
    # one evaluation for the original + two halves per halving step
    assert evaluator.stats.evaluations <= 1 + 2 * math.ceil(math.log2(100))


def test_ddmin_two_culprits_both_needed() -> None:
    evaluator = Evaluator(needs(13, 77), confirm=0)
    result = ddmin(list(range(100)), evaluator)
    assert result.units == [13, 77]
    assert result.complete
    # 1-minimal: removing either culprit loses the failure
    assert needs(13, 77)([13]) is None and needs(13, 77)([77]) is None


def test_ddmin_keeps_order_and_arbitrary_units() -> None:
    units = [f"op{i}" for i in range(30)]
    evaluator = Evaluator(lambda s: "x" if {"op3", "op29", "op17"} <= set(s) else None,
                          confirm=0)
    assert ddmin(units, evaluator).units == ["op3", "op17", "op29"]


def test_ddmin_same_signature_rule_rejects_other_failures() -> None:
    # The original fails with A (needs 10 and 60); 60 alone fails with B, another bug.
    def test(units: Sequence[int]) -> str | None:
        if 10 in units and 60 in units:
            return "A"
        return "B" if 60 in units else None

    evaluator = Evaluator(test, confirm=0)
    result = ddmin(list(range(100)), evaluator)
    assert result.signature == "A"
    assert result.units == [10, 60]
    seen = {e.signature for e in evaluator.stats.log}
    assert "B" in seen  # a B candidate was met, and rejected


def test_ddmin_original_must_fail() -> None:
    with pytest.raises(ReductionError):
        ddmin(list(range(10)), Evaluator(lambda s: None))


def test_ddmin_given_signature_skips_the_original_evaluation() -> None:
    evaluator = Evaluator(needs(3), confirm=0)
    ddmin(list(range(8)), evaluator, "sig:A")
    assert all(e.size < 8 for e in evaluator.stats.log)


def test_confirmation_catches_a_lying_test() -> None:
    """A test that claims 'interesting' on its first call of every candidate."""

    def lying(confirm: int) -> Evaluator[int]:
        calls: dict[tuple[int, ...], int] = {}

        def test(units: Sequence[int]) -> str | None:
            calls[tuple(units)] = calls.get(tuple(units), 0) + 1
            if calls[tuple(units)] == 1:
                return "sig:A"
            return needs(42)(units)

        return Evaluator(test, confirm=confirm)

    trusting = ddmin(list(range(64)), lying(confirm=0), "sig:A")
    assert 42 not in trusting.units  # without re-checks the lie is accepted
    careful = lying(confirm=1)
    result = ddmin(list(range(64)), careful, "sig:A")
    assert result.units == [42]
    assert careful.stats.flaky > 0
    assert careful.stats.confirmations > 0


@pytest.mark.parametrize("seed", range(5))
def test_flaky_test_terminates_with_a_confirmed_result(seed: int) -> None:
    rng = random.Random(seed)

    def flaky(units: Sequence[int]) -> str | None:
        truth = needs(7, 90)(units)
        if rng.random() < 0.1:  # lies both ways
            return None if truth else "sig:A"
        return truth

    evaluator = Evaluator(flaky, confirm=2)
    result = ddmin(list(range(128)), evaluator, "sig:A")
    assert result.complete
    assert {7, 90} <= set(result.units)
    assert len(result.units) < 128
    assert evaluator.stats.evaluations < 2000
    # the accepted result was seen failing three times in a row (1 test + 2 re-checks)
    final = [e for e in evaluator.stats.log if e.key == repr(result.units) and not e.cached]
    assert sum(e.signature == "sig:A" for e in final) >= 3


def test_budget_stop_returns_best_so_far() -> None:
    evaluator = Evaluator(needs(42), stop=Budget(max_evals=5), confirm=0)
    result = ddmin(list(range(100)), evaluator)
    assert not result.complete
    assert result.stopped == "evaluation budget of 5 spent"
    assert evaluator.stats.evaluations == 5
    assert 42 in result.units and len(result.units) < 100
    assert needs(42)(result.units) == "sig:A"


def test_deadline_stop_with_injected_clock() -> None:
    now = [0.0]

    def test(units: Sequence[int]) -> str | None:
        now[0] += 1.0
        return needs(42)(units)

    budget = Budget(timeout=3.5, clock=lambda: now[0])
    evaluator = Evaluator(test, stop=budget, confirm=0)
    result = ddmin(list(range(100)), evaluator)
    assert result.stopped == "deadline reached"
    assert evaluator.stats.evaluations == 4
    assert 42 in result.units


def test_interrupt_flag_and_ctrl_c_stop_cleanly() -> None:
    budget = Budget()
    count = [0]

    def test(units: Sequence[int]) -> str | None:
        count[0] += 1
        if count[0] == 3:
            budget.interrupt()
        return needs(42)(units)

    result = ddmin(list(range(100)), Evaluator(test, stop=budget, confirm=0))
    assert result.stopped == "interrupted" and count[0] == 3

    def ctrl_c(units: Sequence[int]) -> str | None:
        if len(units) < 50:
            raise KeyboardInterrupt
        return needs(42)(units)

    result = ddmin(list(range(100)), Evaluator(ctrl_c, confirm=0))
    assert result.stopped == "interrupted"
    assert len(result.units) == 50 and 42 in result.units


def test_cache_hits_by_content_key() -> None:
    cache: dict[str, str | None] = {}
    first = Evaluator(needs(42), cache=cache, confirm=0)
    ddmin(list(range(100)), first)
    assert first.stats.cache_hits == 0
    again = Evaluator(needs(42), cache=cache, confirm=0)
    result = ddmin(list(range(100)), again)
    assert result.units == [42]
    assert again.stats.evaluations == 0
    assert again.stats.cache_hits == first.stats.evaluations

    # Two unit lists that materialize to the same candidate share one evaluation.
    evaluator = Evaluator(needs(1), key=lambda units: repr(sorted(set(units))), confirm=0)
    assert evaluator.signature([1, 2, 2]) == "sig:A"
    assert evaluator.signature([2, 1]) == "sig:A"
    assert (evaluator.stats.evaluations, evaluator.stats.cache_hits) == (1, 1)


def test_stats_record_and_observer() -> None:
    lines: list[str] = []
    evaluator = Evaluator(
        needs(5), confirm=1,
        observer=lambda e, s: lines.append(f"{e.size} units, {s.evaluations} evaluations"),
    )
    result = ddmin(list(range(16)), evaluator, "sig:A")
    assert result.units == [5]
    stats = result.stats.to_dict()
    assert stats["evaluations"] == len(lines) - stats["cache_hits"]
    assert stats["confirmations"] == sum(e["confirmation"] for e in stats["log"])
    assert lines[-1].endswith(f"{stats['evaluations']} evaluations")


def test_hierarchical_ddmin_strips_groups_before_units() -> None:
    # 8 "submodules" of 8 units; the failure needs units 19 and 22 (both in group 2)
    units = list(range(64))
    seen: list[int] = []

    def test(candidate: Sequence[int]) -> str | None:
        seen.append(len(candidate))
        return needs(19, 22)(candidate)

    evaluator = Evaluator(test, confirm=0)
    result = hierarchical_ddmin(units, evaluator, [lambda u: u // 32, lambda u: u // 8])
    assert result.units == [19, 22]
    assert result.complete and result.strategy == "hierarchical-ddmin"
    # whole groups first: half the model, then two submodules, then the one submodule
    assert seen[:5] == [64, 32, 16, 16, 8]
    flat = Evaluator(needs(19, 22), confirm=0)
    ddmin(units, flat)
    assert evaluator.stats.evaluations <= flat.stats.evaluations


def test_hierarchical_ddmin_stops_inside_a_level_with_the_best_so_far() -> None:
    evaluator = Evaluator(needs(5), stop=Budget(max_evals=3), confirm=0)
    result = hierarchical_ddmin(list(range(40)), evaluator, [lambda u: u // 10])
    assert not result.complete and result.stopped == "evaluation budget of 3 spent"
    assert 5 in result.units and len(result.units) < 40
    assert needs(5)(result.units) == "sig:A"


def test_hierarchical_ddmin_groups_need_not_be_contiguous() -> None:
    # group by parity: units of one parity are interleaved with the other's
    evaluator = Evaluator(needs(4, 8), confirm=0)
    result = hierarchical_ddmin(list(range(16)), evaluator, [lambda u: u % 2])
    assert result.units == [4, 8]
    assert evaluator.stats.log[1].size == 8  # all even units together, then finer

"""The thread pool of isolators, on isolators handed in by the caller (``run``'s crew)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from support import warm_jobs

from nebisect.isolate import Isolator, Job
from nebisect.isolation.cancel import Cancelled
from nebisect.isolation.pool import crew, map_isolated


def test_a_crew_shares_the_first_isolators_cancel_token_and_closes_only_its_own(
        tmp_path: Path) -> None:
    with Isolator("fork", tmp_dir=tmp_path) as first:
        with crew(first, 3) as isolators:
            assert isolators[0] is first and len(isolators) == 3
            assert {i.cancel_token for i in isolators} == {first.cancel_token}
        assert first.run(Job(f"{warm_jobs.__name__}:where", {})).verdict.status == "pass"


def test_map_runs_on_the_given_isolators_one_per_thread_and_leaves_them_open(
        tmp_path: Path) -> None:
    seen: dict[int, set[int]] = {}
    lock = threading.Lock()

    def work(item: int, isolator: Isolator) -> int:
        verdict = isolator.run(Job(f"{warm_jobs.__name__}:where", {})).verdict
        with lock:
            seen.setdefault(id(isolator), set()).add(threading.get_ident())
        return item * int(verdict.status == "pass")

    with Isolator("fork", tmp_dir=tmp_path) as first, crew(first, 2) as isolators:
        assert map_isolated(list(range(8)), work, 2, isolators=isolators) == list(range(8))
        assert set(seen) <= {id(i) for i in isolators}
        assert all(len(threads) == 1 for threads in seen.values())
        # still open: the crew's owner closes them
        assert map_isolated([5], work, 1, isolators=isolators) == [5]


def test_a_failing_item_cancels_the_whole_crew(tmp_path: Path) -> None:
    def work(item: int, isolator: Isolator) -> int:
        if item == 0:
            raise ValueError("boom")
        isolator.run(Job(f"{warm_jobs.__name__}:where", {}))
        return item

    with Isolator("fork", tmp_dir=tmp_path) as first, crew(first, 2) as isolators:
        with pytest.raises(ValueError, match="boom"):
            map_isolated([0, 1, 2, 3], work, 2, isolators=isolators)
        with pytest.raises(Cancelled):
            first.run(Job(f"{warm_jobs.__name__}:where", {}))

"""The one runner: its isolators share one cancel token, its map runs one thread per
isolator and leaves them open, a failing item cancels them all."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from support import warm_jobs

from nebisect.executors.runner import Runner
from nebisect.isolate import Isolator, Job
from nebisect.isolation.cancel import Cancelled


def test_a_runners_isolators_share_the_first_ones_cancel_token_and_it_closes_only_its_own(
        tmp_path: Path) -> None:
    with Isolator("fork", tmp_dir=tmp_path) as first:
        with Runner(3, isolator=first) as runner:
            isolators = runner.isolators
            assert isolators[0] is first is runner.isolator and len(isolators) == 3
            assert {i.cancel_token for i in isolators} == {first.cancel_token}
        assert first.run(Job(f"{warm_jobs.__name__}:where", {})).verdict.status == "pass"


def test_map_runs_on_the_runners_isolators_one_per_thread_and_leaves_them_open(
        tmp_path: Path) -> None:
    seen: dict[int, set[int]] = {}
    lock = threading.Lock()

    def work(item: int, isolator: Isolator) -> int:
        verdict = isolator.run(Job(f"{warm_jobs.__name__}:where", {})).verdict
        with lock:
            seen.setdefault(id(isolator), set()).add(threading.get_ident())
        return item * int(verdict.status == "pass")

    with Isolator("fork", tmp_dir=tmp_path) as first, Runner(2, isolator=first) as runner:
        assert runner.map(list(range(8)), work) == list(range(8))
        assert set(seen) <= {id(i) for i in runner.isolators}
        assert all(len(threads) == 1 for threads in seen.values())
        # still open: the runner closes them
        assert runner.map([5], work) == [5]


def test_a_failing_item_cancels_every_isolator_of_the_runner(tmp_path: Path) -> None:
    def work(item: int, isolator: Isolator) -> int:
        if item == 0:
            raise ValueError("boom")
        isolator.run(Job(f"{warm_jobs.__name__}:where", {}))
        return item

    with Isolator("fork", tmp_dir=tmp_path) as first, Runner(2, isolator=first) as runner:
        with pytest.raises(ValueError, match="boom"):
            runner.map([0, 1, 2, 3], work)
        with pytest.raises(Cancelled):
            first.run(Job(f"{warm_jobs.__name__}:where", {}))

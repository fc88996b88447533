"""The one runner: its isolators share one cancel token, its map runs one thread per
isolator and leaves them open, a failing item cancels them all."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from support import warm_jobs

from nebisect.executors.runner import Runner
from nebisect.isolate import Isolator, Job
from nebisect.isolation import threads
from nebisect.isolation.cancel import Cancelled

THREAD_SHARE = "support.fault_jobs:thread_share"


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


@pytest.mark.parametrize(("jobs", "available", "expected"),
                         [(1, 2, 2), (2, 2, 1), (3, 2, 1), (2, 8, 4), (3, 8, 2), (1, 1, 1)])
def test_a_share_is_the_cores_over_the_jobs_at_least_one(jobs: int, available: int,
                                                         expected: int) -> None:
    assert threads.share(jobs, available) == expected


@pytest.mark.parametrize(("jobs", "share"), [(1, 2), (2, 1)])
def test_every_child_of_a_runner_computes_on_its_share_of_two_cores(
        monkeypatch: pytest.MonkeyPatch, jobs: int, share: int) -> None:
    """One job alone on two cores gets both, each of two jobs one: the variable the
    blockwise passes read and the passes' own count; the BLAS numpy loaded in the
    template on one thread whatever the share (its threads would change values)."""
    monkeypatch.setattr(threads, "cores", lambda: 2)
    with Runner(jobs, mode="fork") as runner:
        assert runner.threads == share
        seen = [isolator.run(Job(THREAD_SHARE, {})).verdict for isolator in runner.isolators]
    assert len(seen) == jobs
    for verdict in seen:
        assert verdict.status == "pass", verdict.message
        assert verdict.job_result == {"variable": str(share), "blas": "1",
                                      "blockwise": share}


def test_a_job_naming_its_share_keeps_it_and_an_isolator_without_one_sets_none(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    with Isolator("fork", threads=1) as shared, Isolator("fork") as unshared:
        own = shared.run(Job(THREAD_SHARE, {}, threads=2)).verdict
        given = shared.run(Job(THREAD_SHARE, {})).verdict
        untouched = unshared.run(Job(THREAD_SHARE, {})).verdict
    assert own.job_result["variable"] == "2" and own.job_result["blockwise"] == 2
    assert given.job_result["variable"] == "1" and given.job_result["blockwise"] == 1
    assert untouched.job_result["variable"] is None
    assert untouched.job_result["blockwise"] == 1


def test_a_job_share_of_no_thread_is_refused() -> None:
    from nebisect.errors import NebisectError

    with pytest.raises(NebisectError, match="threads must be positive, got 0"):
        Job("a:b", {}, threads=0)

"""A thread pool of isolators that stops at once: the engine of the one runner's maps.

Each worker thread owns one :class:`~nebisect.isolation.isolator.Isolator` (isolators
are not thread-safe); all of them share one
:class:`~nebisect.isolation.cancel.CancelToken`. When the calling thread is
interrupted (Ctrl-C, SIGTERM, SIGHUP — signals reach the main thread only) or an item
fails, the token is cancelled: the cases in flight are killed now instead of running to
their timeout, items not started are dropped and every thread is joined before the
exception goes on (the runner that owns the isolators then aborts them).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from nebisect.bounds import MAX_JOBS, check_count
from nebisect.isolation.isolator import Isolator

Item = TypeVar("Item")
Result = TypeVar("Result")


def map_isolated(
    items: Sequence[Item],
    work: Callable[[Item, Isolator], Result],
    jobs: int,
    *,
    isolators: Sequence[Isolator],
) -> list[Result]:
    """``work(item, isolator)`` for every item on up to ``jobs`` threads, in item order,
    each thread on one of ``isolators`` (sharing one cancel token, left open: a
    :class:`~nebisect.executors.runner.Runner`'s). One job (or one item) runs in the
    calling thread, on the first."""
    check_count(f"--jobs {jobs}", jobs, MAX_JOBS)
    jobs = min(jobs, len(isolators))
    cancel = isolators[0].cancel_token
    get = _one_per_thread(isolators)
    if jobs == 1 or len(items) <= 1:
        return [work(item, isolators[0]) for item in items]

    def run_one(item: Item) -> Result:
        return work(item, get())

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures: list[Future[Result]] = []
        try:
            # Submitting is inside: an interruption between two submits must cancel
            # the items already running too, or the pool's exit would wait for them.
            futures += (pool.submit(run_one, item) for item in items)
            return [future.result() for future in futures]
        except BaseException:
            cancel.cancel()
            for future in futures:
                future.cancel()
            raise


def _one_per_thread(given: Sequence[Isolator]) -> Callable[[], Isolator]:
    """Each thread's isolator: the next of ``given`` not taken yet, kept for the thread."""
    local = threading.local()
    free = list(given)
    lock = threading.Lock()

    def get() -> Isolator:
        isolator = getattr(local, "isolator", None)
        if isolator is None:
            with lock:
                isolator = free.pop(0)
            local.isolator = isolator
        return isolator

    return get

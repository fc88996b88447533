"""A thread pool of isolators that stops at once: ``replay``, ``fix verify`` and ``fuzz``.

Each worker thread owns one :class:`~nebisect.isolation.isolator.Isolator` (isolators
are not thread-safe, and a helper dies with the thread that started it); all of them
share one :class:`~nebisect.isolation.cancel.CancelToken`. When the calling thread is
interrupted (Ctrl-C, SIGTERM, SIGHUP — signals reach the main thread only) or an item
fails, the token is cancelled: the cases in flight are killed now instead of running to
their timeout, items not started are dropped, every thread is joined and every
isolator closed before the exception goes on.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from nebisect.errors import NebisectError
from nebisect.isolation.cancel import CancelToken
from nebisect.isolation.isolator import Isolator

Item = TypeVar("Item")
Result = TypeVar("Result")


def default_jobs() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def map_isolated(
    items: Sequence[Item],
    work: Callable[[Item, Isolator], Result],
    jobs: int,
    *,
    mode: str = "auto",
) -> list[Result]:
    """``work(item, isolator)`` for every item on ``jobs`` threads, in item order.

    One job (or one item) runs in the calling thread. Isolators use ``mode``.
    """
    if jobs < 1:
        raise NebisectError(f"--jobs must be at least 1 (got {jobs})")
    cancel = CancelToken()
    with _isolators(mode, cancel) as get:
        if jobs == 1 or len(items) <= 1:
            return [work(item, get()) for item in items]

        def run_one(item: Item) -> Result:
            return work(item, get())

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(run_one, item) for item in items]
            try:
                return [future.result() for future in futures]
            except BaseException:
                cancel.cancel()
                for future in futures:
                    future.cancel()
                raise


@contextlib.contextmanager
def _isolators(mode: str, cancel: CancelToken) -> Iterator[Callable[[], Isolator]]:
    local = threading.local()
    made: list[Isolator] = []
    lock = threading.Lock()

    def get() -> Isolator:
        isolator = getattr(local, "isolator", None)
        if isolator is None:
            isolator = local.isolator = Isolator(mode, cancel=cancel)
            with lock:
                made.append(isolator)
        return isolator

    try:
        yield get
    finally:
        for isolator in made:
            isolator.close()

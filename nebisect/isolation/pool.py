"""A thread pool of isolators that stops at once: replay, fix verify, fuzz, run's exploration.

Each worker thread owns one :class:`~nebisect.isolation.isolator.Isolator` (isolators
are not thread-safe); all of them
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
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from nebisect.bounds import MAX_JOBS, check_count
from nebisect.isolation.cancel import CancelToken
from nebisect.isolation.isolator import Isolator

Item = TypeVar("Item")
Result = TypeVar("Result")


def default_jobs() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


@contextlib.contextmanager
def crew(first: Isolator, jobs: int) -> Iterator[list[Isolator]]:
    """``first`` and ``jobs - 1`` more isolators of its mode, made here, sharing its
    cancel token, for :func:`map_isolated`'s ``isolators``; the ones made are closed on
    exit (aborted on an exception). They outlive every map over them, so their helpers
    can be started ahead (:meth:`Isolator.prestart`) and stay warm between maps."""
    with contextlib.ExitStack() as made:
        yield [first, *(made.enter_context(Isolator(first.mode, cancel=first.cancel_token))
                        for _ in range(jobs - 1))]


def map_isolated(
    items: Sequence[Item],
    work: Callable[[Item, Isolator], Result],
    jobs: int,
    *,
    mode: str = "auto",
    isolators: Sequence[Isolator] = (),
) -> list[Result]:
    """``work(item, isolator)`` for every item on ``jobs`` threads, in item order.

    One job (or one item) runs in the calling thread. Each thread makes an isolator of
    ``mode``, closed at the end, unless ``isolators`` are given (one per thread, sharing
    one cancel token, and left open: :func:`crew`).
    """
    check_count(f"--jobs {jobs}", jobs, MAX_JOBS)
    if isolators:
        jobs = min(jobs, len(isolators))
    cancel = isolators[0].cancel_token if isolators else CancelToken()
    with _isolators(mode, cancel, isolators) as get:
        if jobs == 1 or len(items) <= 1:
            return [work(item, get()) for item in items]

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


@contextlib.contextmanager
def _isolators(mode: str, cancel: CancelToken,
               given: Sequence[Isolator]) -> Iterator[Callable[[], Isolator]]:
    """Each thread's isolator: the next of ``given``, else a new one, closed at the end
    (aborted on an exception)."""
    local = threading.local()
    free = list(given)
    lock = threading.Lock()
    with contextlib.ExitStack() as made:

        def get() -> Isolator:
            isolator = getattr(local, "isolator", None)
            if isolator is None:
                with lock:
                    isolator = free.pop(0) if free else made.enter_context(
                        Isolator(mode, cancel=cancel))
                local.isolator = isolator
            return isolator

        yield get

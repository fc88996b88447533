"""The one runner: a command's isolators and its executor, opened once per command.

Every fan-out in nebisect goes through a :class:`Runner` — ``run``'s cells and its
exploration, op and model fuzz shards, replay, fix verification — so each command (and
the Python API) opens one, and nothing below a command makes isolators or executors of
its own:

* :meth:`Runner.map` runs work that needs this process's state (a workbench's caches,
  a model session's conversions) on ``jobs`` threads, each with one of the runner's
  isolators (:func:`~nebisect.isolation.pool.map_isolated`); one job runs in the calling
  thread on the first.
* :attr:`Runner.isolator` is the command's own: it describes and converts sources. It
  is the first of the pool unless the pool is ``persistent`` (fuzzing throughput): a
  warm worker that ran a user's factory would carry its state into the next job, so
  the command's own isolator then starts a fresh process per job.
* :meth:`Runner.map_units` runs :class:`~nebisect.executors.units.Unit` records on the
  executor: a Dask cluster's workers (``--cluster``), else the same isolators here
  (:class:`~nebisect.executors.local.LocalExecutor`).

The isolators live as long as the runner, so the templates a hint starts
(:meth:`Runner.expect`) stay warm from one map to the next; they share one cancel
token, so an interruption or a failing item stops every case in flight at once.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from types import TracebackType
from typing import TypeVar

from nebisect.bounds import MAX_JOBS, check_count
from nebisect.executors import Executor, open_executor
from nebisect.executors.invocation import Invocation
from nebisect.executors.local import LocalExecutor
from nebisect.executors.units import Unit, UnitResult
from nebisect.isolation.isolator import Isolator
from nebisect.isolation.needs import Needs
from nebisect.isolation.pool import map_isolated
from nebisect.isolation.threads import share

Item = TypeVar("Item")
Result = TypeVar("Result")


class Runner:
    """``jobs`` isolators of ``mode`` and the executor for ``cluster`` (or
    ``$NEBISECT_CLUSTER``; none: this machine), closed together.

    ``memory``: the bytes each job of its isolators (and its cluster's workers) may use
    (``--memory``; None: the machine default). Each job of the isolators it opens
    computes on its share of the cores among the ``jobs`` running at once
    (:attr:`threads`, :func:`~nebisect.isolation.threads.share`). :meth:`of` opens one
    for an :class:`~nebisect.executors.invocation.Invocation`, which it keeps.

    ``isolator``: an isolator the caller owns and keeps (a bisection's, a test's) to
    serve as the first one; ``executor``: likewise, an executor the caller owns (a
    cluster client it inspects) instead of the one ``cluster`` names; ``local``: units
    run on these isolators whatever ``$NEBISECT_CLUSTER`` says (a command that runs no
    units — lint, fix, corpus record — connects to no cluster). The runner closes only
    what it made.
    """

    def __init__(self, jobs: int = 1, *, cluster: str | None = None, mode: str = "auto",
                 memory: int | None = None, isolator: Isolator | None = None,
                 executor: Executor | None = None, local: bool = False) -> None:
        check_count(f"--jobs {jobs}", jobs, MAX_JOBS)
        self.jobs = jobs
        #: the threads each job of this runner's isolators may compute on
        self.threads = share(jobs)
        self.invocation = Invocation(memory=memory, jobs=jobs, cluster=cluster)
        self._made = contextlib.ExitStack()
        try:
            first = isolator or self._made.enter_context(
                Isolator(mode, memory=memory, threads=self.threads))
            token = first.cancel_token
            self.isolators = [first, *(
                self._made.enter_context(Isolator(first.mode, cancel=token, memory=memory,
                                                  threads=self.threads))
                for _ in range(jobs - 1))]
            self.isolator = first if isolator or first.mode != "persistent" else (
                self._made.enter_context(Isolator(cancel=token, memory=memory,
                                                  threads=self.threads)))
            self.executor: Executor = executor or self._made.enter_context(open_executor(
                cluster, isolators=self.isolators, mode=self.isolator.mode, memory=memory,
                local=local))
        except BaseException:
            self._made.close()
            raise

    @classmethod
    def of(cls, invocation: Invocation, *, mode: str = "auto", local: bool = False
           ) -> Runner:
        """The runner of ``invocation``: its jobs, cluster and memory limit, kept as
        :attr:`invocation` (``local``: as for the constructor)."""
        runner = cls(invocation.jobs, cluster=invocation.cluster, mode=mode,
                     memory=invocation.memory, local=local)
        runner.invocation = invocation
        return runner

    @property
    def remote(self) -> bool:
        """Do units run elsewhere (on a cluster's workers) rather than on these isolators?"""
        return not isinstance(self.executor, LocalExecutor)

    def expect(self, needs: Needs, *, threads: int = 1) -> None:
        """A hint of the work to come: the first ``threads`` isolators start the helper
        jobs with ``needs`` will run in now (:meth:`Isolator.expect`)."""
        for isolator in self.isolators[:max(1, threads)]:
            isolator.expect(needs)

    def extra_isolator(self, mode: str) -> Isolator:
        """A further isolator of ``mode`` sharing the runner's cancel token, for a stage
        that needs a kind of process of its own (a bisection's persistent graph
        worker), its jobs under the runner's memory limit; the caller closes it (a
        context manager) when the stage ends."""
        return Isolator(mode, cancel=self.isolator.cancel_token,
                        memory=self.invocation.memory, threads=self.threads)

    def map(self, items: Sequence[Item], work: Callable[[Item, Isolator], Result]
            ) -> list[Result]:
        """``work(item, isolator)`` for every item, in item order, on up to ``jobs``
        threads of this runner's isolators (one job, or one item: in this thread)."""
        return map_isolated(items, work, self.jobs, isolators=self.isolators)

    def map_units(self, units: Sequence[Unit],
                  on_result: Callable[[int, UnitResult], None] | None = None
                  ) -> list[UnitResult]:
        """Every unit's result on the executor, in unit order; ``on_result(index,
        result)`` as each ends."""
        return self.executor.map(units, on_result)

    def abort(self) -> None:
        """Kill every helper now (an interrupted command: nothing is waited for)."""
        for isolator in {*self.isolators, self.isolator}:
            isolator.abort()

    def close(self) -> None:
        self._made.close()

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        """Closed; aborted first when left by an exception."""
        if exc is not None:
            self.abort()
        self._made.__exit__(exc_type, exc, traceback)


@contextlib.contextmanager
def using(runner: Runner | None, jobs: int = 1, mode: str = "auto",
          memory: int | None = None) -> Iterator[Runner]:
    """``runner`` (the caller's, left open), else a runner of ``jobs`` threads here with
    isolators of ``mode`` under ``memory`` bytes a job, opened for the block: what a
    function called from a command or from Python uses."""
    if runner is not None:
        yield runner
        return
    with Runner(jobs, mode=mode, memory=memory) as made:
        yield made

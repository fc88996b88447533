"""The Dask executor: units on the workers of a Dask scheduler (``--cluster``).

Client side of :mod:`nebisect.executors.worker`. Each unit is one task,
``run_unit(unit JSON, run id, index, mode)``; a unit whose blobs the worker lacks is
answered ``missing`` and resubmitted (to the same worker, others allowed) after exactly
those blobs were pushed there. Dask reschedules a unit whose worker died; the worker
that runs the retry reports the attempts that died, and a third start is refused, so
every unit ends with exactly one result that lists its attempts.

A unit for one device (``resources``, from ``--devices``: the Dask worker resources
its facts advertise, :mod:`nebisect.executors.devices`) runs only on a worker that has
them — the scheduler enforces it, also for a retry. If no worker with them is left in
the cluster, it ends as an error naming them instead of waiting for a machine that is
gone.

An interruption (Ctrl-C, SIGTERM: a ``KeyboardInterrupt`` in the main thread) cancels
the futures and tells every worker to cancel the run, which kills its cases in flight.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import queue
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from nebisect.errors import NebisectError
from nebisect.executors import worker
from nebisect.executors.devices import fact_resources
from nebisect.executors.units import Attempt, Unit, UnitResult

#: seconds to wait for the scheduler before "cannot reach" (exit 2);
#: ``$NEBISECT_CLUSTER_TIMEOUT`` overrides it
CONNECT_TIMEOUT = 10.0
TIMEOUT_ENV = "NEBISECT_CLUSTER_TIMEOUT"
#: a unit resubmitted this many times for missing blobs is given up (a worker that
#: cannot keep its cache)
MAX_ROUNDS = 8
_POLL = 1.0


def _distributed() -> Any:
    try:
        import distributed
    except ImportError as exc:
        raise NebisectError(
            f"--cluster: Dask is unavailable: install nebisect[cluster] ({exc})"
        ) from None
    return distributed


class ClusterExecutor:
    """Runs units on the workers of the Dask scheduler at ``address``."""

    def __init__(self, address: str, *, mode: str = "auto",
                 connect_timeout: float | None = None) -> None:
        distributed = _distributed()
        if connect_timeout is None:
            connect_timeout = float(os.environ.get(TIMEOUT_ENV, CONNECT_TIMEOUT))
        #: blobs pushed, per (worker address, sha256): each should be 1
        self.shipped: Counter[tuple[str, str]] = Counter()
        # The client's own reconnect chatter is not the user's business: one line is.
        logging.getLogger("distributed").setLevel(logging.CRITICAL)
        self.name, self.mode = address, mode
        try:
            self.client = distributed.Client(address, timeout=connect_timeout,
                                             set_as_default=False)
        except (OSError, TimeoutError, ValueError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise NebisectError(f"cannot reach the Dask scheduler at {address}: {reason}"
                                ) from None

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.client.close()

    def worker_records(self) -> dict[str, dict[str, Any]]:
        """The scheduler's record of every worker (name, resources…), fetched now.

        Not ``Client.scheduler_info``: it returns the client's cached identity, which
        the client's own periodic refresh (every 2 s) overwrites with a summary that
        lists no worker — a read landing just after one finds none, or too few
        (distributed 2026.8; it made the device matrix lose a device now and then).
        """
        identity = self.client.sync(self.client.scheduler.identity, n_workers=-1)
        return dict(identity["workers"])

    def workers(self) -> dict[str, dict[str, str]]:
        """The address and device facts of every worker that advertises them as resources
        (a unit asking for a device's resources could never run on one that does not)."""
        facts: dict[str, dict[str, str]] = self.client.run(worker.facts)
        info = self.worker_records()
        return {address: found for address, found in facts.items()
                if set(fact_resources(found)) <= set(info[address].get("resources") or {})}

    def map(
        self,
        units: Sequence[Unit],
        on_result: Callable[[int, UnitResult], None] | None = None,
        *,
        resources: Sequence[dict[str, float]] | None = None,
    ) -> list[UnitResult]:
        """Every unit's result in unit order; unit i runs only on workers that have
        ``resources[i]``."""
        run = _Run(self, units, resources)
        try:
            return run.wait(on_result)
        except BaseException:
            run.cancel()
            raise
        finally:
            with contextlib.suppress(Exception):
                self.client.run(worker.end_run, run.run_id)


class _Run:
    """One :meth:`ClusterExecutor.map`: its futures, and what each unit still lacks."""

    def __init__(self, executor: ClusterExecutor, units: Sequence[Unit],
                 resources: Sequence[dict[str, float]] | None) -> None:
        self.executor = executor
        self.client, self.mode, self.shipped = executor.client, executor.mode, executor.shipped
        self.units, self.resources = units, resources
        self.run_id = uuid.uuid4().hex[:12]
        self.manifests = [unit.manifest() for unit in units]
        # Futures land here as they finish (callbacks run in the client's thread); the
        # main thread waits on it with a timeout, so Ctrl-C is seen at once.
        self.done: queue.Queue[Any] = queue.Queue()
        self.futures: dict[Any, tuple[int, int]] = {}
        for index in range(len(units)):
            self._submit(index, 0, None)

    def _submit(self, index: int, rounds: int, prefer: str | None) -> None:
        """Submit unit ``index``, preferring the worker ``prefer`` (its blobs were pushed
        there). Not a unit for a device: Dask lets a task with loose restrictions run
        on a worker without its resources, so that one goes wherever the scheduler has
        a worker of the device (one without the blobs asks for them in turn)."""
        unit, resources = self.units[index], self.resources[index] if self.resources else None
        workers = [prefer] if prefer is not None and resources is None else None
        future = self.client.submit(
            worker.run_unit, unit.to_json(self.manifests[index]),
            self.run_id, index, self.mode, key=f"nebisect-{self.run_id}-{index}-{rounds}",
            workers=workers, allow_other_workers=workers is not None, pure=False,
            resources=resources,
        )
        self.futures[future] = (index, rounds)
        future.add_done_callback(self.done.put)

    def wait(self, on_result: Callable[[int, UnitResult], None] | None) -> list[UnitResult]:
        results: dict[int, UnitResult] = {}
        while self.futures:
            finished = self._orphaned()
            with contextlib.suppress(queue.Empty):
                future = self.done.get(timeout=_POLL)
                if future in self.futures:
                    finished.append(self._answer(future))
            for index, result in finished:
                if result is None:
                    continue
                results[index] = result
                if on_result is not None:
                    on_result(index, result)
        return [results[i] for i in range(len(self.units))]

    def _answer(self, future: Any) -> tuple[int, UnitResult | None]:
        """The unit's result, or None when it was resubmitted (blobs pushed)."""
        index, rounds = self.futures.pop(future)
        try:
            body = json.loads(future.result())
        except Exception as exc:  # KilledWorker, a worker without nebisect, a lost scheduler
            return index, UnitResult(None, [], f"{type(exc).__name__}: {exc}")
        address = body["worker"]
        if "missing" in body:
            if rounds >= MAX_ROUNDS:
                return index, UnitResult(None, [Attempt(address, "error", "blobs missing")],
                                         f"worker {address} keeps losing the unit's files")
            self._push(index, address, body["missing"])
            self._submit(index, rounds + 1, address)
            return index, None
        if "lost" in body:
            attempts = [Attempt(w, "lost", "worker died mid-unit") for w in body["lost"]]
            return index, UnitResult(None, attempts,
                                     f"{len(attempts)} workers died running this unit")
        attempts = [Attempt(w, "lost", "worker died mid-unit") for w in body["earlier"]]
        if "value" in body:
            return index, UnitResult(body["value"], [*attempts, Attempt(address, "done")])
        detail = "cancelled" if body.get("cancelled") else body.get("error", "no answer")
        return index, UnitResult(None, [*attempts, Attempt(address, "error", detail)], detail)

    def _push(self, index: int, address: str, missing: list[str]) -> None:
        """Send ``address`` the blobs it lacks; a file that no longer has the content it
        was hashed with is dropped from the unit (the worker then sees it missing)."""
        unit, manifest = self.units[index], self.manifests[index]
        blobs: dict[str, bytes] = {}
        for name, digest in list(manifest.items()):
            if digest in missing and digest not in blobs:
                data = unit.blob(name, digest)
                if data is None:
                    del manifest[name]
                else:
                    blobs[digest] = data
        if blobs:
            self.client.run(worker.store_blobs, blobs, workers=[address])
            self.shipped.update((address, digest) for digest in blobs)

    def _orphaned(self) -> list[tuple[int, UnitResult | None]]:
        """Units for a device no worker of the cluster has (any more): an error each."""
        if not self.resources:
            return []
        present = [set(info.get("resources") or {}) for info in
                   self.executor.worker_records().values()]
        ended: list[tuple[int, UnitResult | None]] = []
        for future, (index, _) in list(self.futures.items()):
            wanted = set(self.resources[index])
            if not any(wanted <= have for have in present):
                self.futures.pop(future)
                future.cancel()
                gone = " ".join(sorted(wanted))
                ended.append((index, UnitResult(None, [Attempt(gone, "lost", "left")],
                                                f"no worker with {gone} is left in the "
                                                "cluster")))
        return ended

    def cancel(self) -> None:
        """Cancel every future, and every worker's cases of this run."""
        with contextlib.suppress(Exception):
            self.client.run(worker.cancel_run, self.run_id)
        with contextlib.suppress(Exception):
            self.client.cancel(list(self.futures), force=True)

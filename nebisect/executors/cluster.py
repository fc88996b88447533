"""The Dask executor: units on the workers of a Dask scheduler (``--cluster``).

Client side of :mod:`nebisect.executors.worker`. Each unit is one task,
``run_unit(unit JSON, run id, index, mode, memory)``: the worker isolates it in the
command's isolation mode, under the command's memory limit; a unit whose blobs the worker lacks is
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

Every wait on the scheduler is bounded by the timeout (``$NEBISECT_CLUSTER_TIMEOUT``):
connecting and Dask's handshake (distributed's ``connect`` awaits the peer's handshake
with no deadline of its own, so a port that accepts and never answers would hang), each
exchange with it, and closing; while units run, a scheduler that has reported nothing for
that long must answer a ping. Whatever fails — no answer, bytes that are not Dask's
protocol, a lost connection — is one line (a :class:`NebisectError`), and the client is
closed before it is raised, so Dask's own ``Client.__del__`` has nothing left to wait for.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import queue
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from nebisect.errors import NebisectError
from nebisect.executors import worker
from nebisect.executors.devices import fact_resources
from nebisect.executors.units import Attempt, Unit, UnitResult

#: seconds any wait on the scheduler may last (connecting, its handshake, each exchange)
#: before the run ends with one line and exit 2; ``$NEBISECT_CLUSTER_TIMEOUT`` overrides it.
#: Dask's own connect default: a scheduler on a loaded machine (its workers' cases sharing
#: the cores) can leave a ping unanswered for several seconds and is still healthy
CONNECT_TIMEOUT = 30.0
TIMEOUT_ENV = "NEBISECT_CLUSTER_TIMEOUT"
#: how much longer than Dask's own connect deadline the whole connection may take: Dask
#: gives up a TCP connection at the timeout with a clearer reason (refused, …) than ours
_GRACE = 1.0
#: blobs pushed to a worker may take the timeout plus this long per byte (64 KiB/s: a
#: slow uplink still gets its model through)
_PUSH_SECONDS_PER_BYTE = 1 / (64 * 1024)
#: a unit resubmitted this many times for missing blobs is given up (a worker that
#: cannot keep its cache)
MAX_ROUNDS = 8
_POLL = 1.0


def cluster_timeout() -> float:
    """``$NEBISECT_CLUSTER_TIMEOUT`` (seconds, > 0), else :data:`CONNECT_TIMEOUT`."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return CONNECT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise NebisectError(f"${TIMEOUT_ENV} must be a number of seconds > 0, not {text!r}")
    return value


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

    def __init__(self, address: str, *, mode: str = "auto", memory: int | None = None,
                 timeout: float | None = None) -> None:
        distributed = _distributed()
        self.timeout = cluster_timeout() if timeout is None else timeout
        #: blobs pushed, per (worker address, sha256): each should be 1
        self.shipped: Counter[tuple[str, str]] = Counter()
        # The client's own reconnect chatter is not the user's business: one line is.
        logging.getLogger("distributed").setLevel(logging.CRITICAL)
        self.name, self.mode, self.memory = address, mode, memory
        #: why the scheduler is given up on (it stopped answering…): no more waits on it
        self.failed: str | None = None
        self.client = _connect(distributed, address, self.timeout)

    def close(self) -> None:
        _close(self.client, self.timeout)

    def call(self, what: str, function: Callable[..., Any], *args: Any,
             timeout: float | None = None, **kwargs: Any) -> Any:
        """``await function(*args, **kwargs)`` on the client's loop, for at most the
        timeout (or ``timeout``); a scheduler that does not answer in time, or is gone,
        is a :class:`NebisectError` naming ``what`` was asked."""
        if self.failed is not None:  # cancelling, ending the run: not one more timeout
            raise NebisectError(self.failed)
        limit = self.timeout if timeout is None else timeout
        try:
            return self.client.sync(function, *args, callback_timeout=limit, **kwargs)
        except TimeoutError:
            self.failed = (f"the Dask scheduler at {self.name} did not answer within "
                           f"{limit:g} s ({what})")
        except Exception as exc:  # CommClosedError (gone), an answer Dask cannot read…
            self.failed = (f"the Dask cluster at {self.name} failed ({what}): "
                           f"{_described(exc)}")
        raise NebisectError(self.failed)

    def run(self, what: str, function: Callable[..., Any], *args: Any,
            workers: list[str] | None = None, timeout: float | None = None) -> Any:
        """``Client.run(function, *args, workers=workers)``, bounded as :meth:`call`."""
        return self.call(what, self.client._run, function, *args, workers=workers,
                         timeout=timeout)

    def worker_records(self) -> dict[str, dict[str, Any]]:
        """The scheduler's record of every worker (name, resources…), fetched now.

        Not ``Client.scheduler_info``: it returns the client's cached identity, which
        the client's own periodic refresh (every 2 s) overwrites with a summary that
        lists no worker — a read landing just after one finds none, or too few
        (distributed 2026.8; it made the device matrix lose a device now and then).
        """
        identity = self.call("its workers", self.client.scheduler.identity, n_workers=-1)
        return dict(identity["workers"])

    def ping(self) -> None:
        """Ask the scheduler who it is: :class:`NebisectError` if it does not answer."""
        self.call("still there?", self.client.scheduler.identity, n_workers=0)

    def workers(self) -> dict[str, dict[str, str]]:
        """The address and device facts of every worker that advertises them as resources
        (a unit asking for a device's resources could never run on one that does not)."""
        facts: dict[str, dict[str, str]] = self.run("the workers' facts", worker.facts)
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
                self.run("ending the run", worker.end_run, run.run_id)


def _connect(distributed: Any, address: str, timeout: float) -> Any:
    """A client of the scheduler at ``address``, connected and past Dask's handshake
    within ``timeout`` (and :data:`_GRACE`), else :class:`NebisectError`."""
    comm = distributed.comm
    try:
        scheme, location = comm.parse_address(address)
        comm.registry.get_backend(scheme)
        if scheme in ("tcp", "tls"):
            comm.parse_host_port(location)
    except (TypeError, ValueError) as exc:
        raise NebisectError(f"--cluster {address!r} is not a Dask scheduler address: "
                            f"{_first_line(exc)}") from None

    class BoundedClient(distributed.Client):
        """A client whose start (connect, handshake, first exchanges) has a deadline,
        and that closes itself when its start fails (else ``__del__`` waits on it)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            try:
                super().__init__(*args, **kwargs)
            except BaseException:
                _close(self, timeout)
                raise

        async def _start(self, *args: Any, **kwargs: Any) -> Any:
            return await asyncio.wait_for(super()._start(*args, **kwargs), timeout + _GRACE)

    try:
        return BoundedClient(address, timeout=timeout, set_as_default=False)
    except Exception as exc:
        raise NebisectError(f"cannot reach the Dask scheduler at {address}: "
                            f"{_unreachable(distributed, exc, timeout)}") from None


def _unreachable(distributed: Any, exc: Exception, timeout: float) -> str:
    """Why connecting failed, in a few words."""
    if type(exc) is TimeoutError:  # our deadline: connected, then no (complete) answer
        return f"no answer from a Dask scheduler within {timeout:g} s"
    if isinstance(exc, distributed.comm.CommClosedError):
        return "it closed the connection (not a Dask scheduler?)"
    if isinstance(exc, OSError):  # Dask's own connect deadline, with the last refusal
        reason = _first_line(exc)
        cause = exc.__cause__
        while cause is not None and cause.__cause__ is not None:
            cause = cause.__cause__
        if isinstance(cause, OSError) and cause.strerror:
            reason += f" ({cause.strerror})"
        return reason
    if isinstance(exc, ImportError):  # the scheduler refused our versions
        return _first_line(exc)
    return f"its answer is not Dask's protocol ({_described(exc)})"


def _close(client: Any, timeout: float) -> None:
    """Close ``client`` within ``timeout``. If that fails, mark it closed anyway
    (``Client.__del__`` would try again, for twice the timeout) and stop its loop
    (``close`` leaves it running for a client whose start failed early)."""
    with contextlib.suppress(Exception):
        client.close(timeout=timeout)
    if getattr(client, "status", "closed") != "closed":
        client.status = "closed"
    with contextlib.suppress(Exception):
        client._loop_runner.stop(timeout=timeout)  # nothing to do when close stopped it


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _described(exc: BaseException) -> str:
    kind = type(exc)
    # struct.error says "error": the module of a top-level one says what it is
    top = kind.__module__ not in ("builtins", "__main__") and "." not in kind.__module__
    name = f"{kind.__module__}.{kind.__qualname__}" if top else kind.__qualname__
    return f"{name}: {_first_line(exc)}" if str(exc).strip() else name


class _Run:
    """One :meth:`ClusterExecutor.map`: its futures, and what each unit still lacks."""

    def __init__(self, executor: ClusterExecutor, units: Sequence[Unit],
                 resources: Sequence[dict[str, float]] | None) -> None:
        self.executor = executor
        self.client, self.mode, self.shipped = executor.client, executor.mode, executor.shipped
        self.memory = executor.memory
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
            self.run_id, index, self.mode, self.memory,
            key=f"nebisect-{self.run_id}-{index}-{rounds}",
            workers=workers, allow_other_workers=workers is not None, pure=False,
            resources=resources,
        )
        self.futures[future] = (index, rounds)
        future.add_done_callback(self.done.put)

    def wait(self, on_result: Callable[[int, UnitResult], None] | None) -> list[UnitResult]:
        results: dict[int, UnitResult] = {}
        heard = time.monotonic()
        while self.futures:
            finished = self._orphaned()
            try:
                future = self.done.get(timeout=_POLL)
            except queue.Empty:
                # Units may run for long; a scheduler silent for the timeout must still
                # answer (one that stopped answering would otherwise be waited on forever).
                if time.monotonic() - heard >= self.executor.timeout:
                    self.executor.ping()
                    heard = time.monotonic()
            else:
                heard = time.monotonic()
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
            body = json.loads(future.result(timeout=self.executor.timeout))
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
            size = sum(len(data) for data in blobs.values())
            self.executor.run(f"sending {size} bytes to worker {address}", worker.store_blobs,
                              blobs, workers=[address],
                              timeout=self.executor.timeout + size * _PUSH_SECONDS_PER_BYTE)
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
            self.executor.run("cancelling the run", worker.cancel_run, self.run_id)
        with contextlib.suppress(Exception):
            self.client.cancel(list(self.futures), force=True)  # only tells the scheduler

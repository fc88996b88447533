"""What runs on a Dask worker: one unit in nebisect's isolated child, exactly as locally.

The client submits :func:`run_unit` with a unit's JSON (kind, payload, file hashes) and
plain strings; nothing else crosses the wire. On the worker:

* **Files by content hash.** A worker keeps a blob cache in its own local directory
  (removed with the worker), keyed by sha256. A unit whose blobs are not all there runs
  nothing and answers ``missing``; the client pushes exactly those blobs to exactly this
  worker (:func:`store_blobs`, which checks every hash) and resubmits — so a model is
  shipped once per worker, and a worker restarted empty simply asks again.
* **Isolation.** The unit's files are copied into a fresh directory, and the kind's
  handler runs there with this thread's :class:`~nebisect.isolation.isolator.Isolator`:
  a case that segfaults kills its own child, the worker reports ``crash:SIGSEGV``.
* **Attempts.** Dask reschedules a task whose worker died. Before running, a unit
  claims its start in a scheduler event topic of the run; the claims already there are
  the attempts that died under it. A third start is refused (``lost``): a unit is
  retried once, never looped over a fleet it keeps killing.
* **Cancellation.** Every run has a :class:`~nebisect.isolation.cancel.CancelToken`
  per worker; :func:`cancel_run` (sent to every worker when the client is interrupted)
  cancels it, which kills the run's cases in flight and refuses the rest; :func:`end_run`
  (sent when a run ends either way) closes the run's isolators, so no case process and
  no helper of the run is left on any worker.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from nebisect.executors.devices import local_facts
from nebisect.executors.units import Unit, run_unit_here, sha256_hex, to_wire
from nebisect.isolation.cancel import Cancelled, CancelToken
from nebisect.isolation.isolator import Isolator

#: starts of one unit allowed: the first, and one retry after its worker died
MAX_ATTEMPTS = 2
BLOBS = "nebisect-blobs"

class _RunState:
    """One run on this worker: its cancel token and the isolators its threads made."""

    def __init__(self) -> None:
        self.token = CancelToken()
        self.lock = threading.Lock()
        self.idle: set[Isolator] = set()
        self.ended = False

    def acquire(self, isolator: Isolator) -> None:
        with self.lock:
            self.idle.discard(isolator)

    def release(self, isolator: Isolator) -> None:
        """A unit is done with ``isolator``: kept warm for the run, closed if it ended."""
        with self.lock:
            if not self.ended:
                self.idle.add(isolator)
                return
        isolator.close()

    def end(self) -> None:
        """Close every idle isolator now, and each busy one when its unit is done."""
        with self.lock:
            self.ended, idle, self.idle = True, self.idle, set()
        for isolator in idle:
            isolator.close()


_runs: dict[str, _RunState] = {}
_runs_lock = threading.Lock()
_thread = threading.local()


def _run_state(run_id: str) -> _RunState:
    with _runs_lock:
        return _runs.setdefault(run_id, _RunState())


def _isolator(run_id: str, mode: str, memory: int | None) -> Isolator:
    """This thread's isolator for ``run_id`` (each run makes its own, under its
    command's ``memory`` limit)."""
    current: tuple[str, str, Isolator] | None = getattr(_thread, "current", None)
    if current is not None and current[:2] == (run_id, mode):
        return current[2]
    isolator = Isolator(mode, cancel=_run_state(run_id).token, memory=memory)
    _thread.current = (run_id, mode, isolator)
    return isolator


def _local_directory(dask_worker: Any = None) -> Path:
    from distributed import get_worker

    worker = dask_worker or get_worker()
    return Path(worker.local_directory)


def run_unit(unit_json: str, run_id: str, index: int, mode: str, memory: int | None) -> str:
    """Run unit ``index`` of ``run_id`` here; a JSON answer (see the module docstring).

    Claims name the unit by its index in the run, not by the task's key: a unit
    resubmitted after its blobs were pushed is still the same unit."""
    from distributed import get_client, get_worker

    address = get_worker().address
    unit = Unit.from_json(unit_json)
    cache = _local_directory() / BLOBS
    missing = sorted({d for d in unit.files.values() if not (cache / d).is_file()})
    if missing:
        return json.dumps({"missing": missing, "worker": address})
    client = get_client()
    topic = f"nebisect-attempts-{run_id}"
    earlier = [msg["worker"] for _, msg in client.get_events(topic) if msg["unit"] == index]
    client.log_event(topic, {"unit": index, "worker": address})
    if len(earlier) >= MAX_ATTEMPTS:
        return json.dumps({"lost": earlier, "worker": address})
    answer: dict[str, Any] = {"worker": address, "earlier": earlier}
    with tempfile.TemporaryDirectory(prefix="unit-", dir=_local_directory()) as scratch:
        root = Path(scratch, "files")
        for name, digest in unit.files.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(cache / digest, root / name)
        root.mkdir(exist_ok=True)
        state, isolator = _run_state(run_id), _isolator(run_id, mode, memory)
        state.acquire(isolator)
        try:
            answer["value"] = run_unit_here(unit, root, Path(scratch, "work"), isolator)
        except Cancelled:
            answer["cancelled"] = True
        except Exception as exc:  # a handler's failure is this unit's error, not the worker's
            answer["error"] = f"{type(exc).__name__}: {exc}"
        finally:
            state.release(isolator)
    return to_wire(answer)


def store_blobs(blobs: dict[str, bytes], dask_worker: Any = None) -> int:
    """Add ``blobs`` to this worker's cache (each written atomically, its hash checked);
    how many were stored. Called through ``client.run`` on one worker."""
    cache = _local_directory(dask_worker) / BLOBS
    cache.mkdir(exist_ok=True)
    stored = 0
    for digest, data in blobs.items():
        if sha256_hex(data) != digest:
            continue
        staging = cache / f".{digest}.{os.getpid()}.{threading.get_ident()}"
        staging.write_bytes(data)
        staging.replace(cache / digest)
        stored += 1
    return stored


def cancel_run(run_id: str) -> None:
    """Cancel the run's cases in flight on this worker, and refuse its later units."""
    _run_state(run_id).token.cancel()


def end_run(run_id: str) -> None:
    """A run is over: close its isolators (their helpers end), forget its state.

    Nothing of a run outlives it on a worker; the next run starts its helpers anew."""
    with _runs_lock:
        state = _runs.pop(run_id, None)
    if state is not None:
        state.end()


def facts() -> dict[str, str]:
    """This worker's device facts (see :mod:`nebisect.executors.devices`)."""
    return local_facts()

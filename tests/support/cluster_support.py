"""A real Dask cluster for the executor tests, and what tests look at on its workers.

The workers are started by the test process, so they inherit its environment: the
``NEBISECT_TEST_*`` files the slow test targets use are set before the cluster starts
and reset per test.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

distributed = __import__("pytest").importorskip("distributed")


@contextmanager
def local_cluster(scratch: Path, **kwargs: Any) -> Iterator[Any]:
    """``LocalCluster(n_workers=2, processes=True, threads_per_worker=1)`` and a client."""
    options = dict(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                   local_directory=str(scratch), silence_logs=50)
    options.update(kwargs)
    with scratch_space(scratch), distributed.LocalCluster(**options) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        yield cluster, client


def scratch_space(scratch: Path) -> Any:
    """Dask's own scratch space (``dask-scratch-space/*.lock``) in ``scratch``, not /tmp."""
    import dask

    return dask.config.set({"temporary-directory": str(scratch)})


@contextmanager
def slow_target_cluster(root: Path) -> Iterator[tuple[Any, Any, Path]]:
    """A :func:`local_cluster` whose workers see the slow test targets' files in
    ``root/signals`` (set in the environment before the workers start)."""
    signals = root / "signals"
    signals.mkdir()
    saved = dict(os.environ)
    os.environ.update(NEBISECT_TEST_CALLS=str(signals / "calls"),
                      NEBISECT_TEST_READY=str(signals / "ready"))
    try:
        with local_cluster(root) as (cluster, client):
            yield cluster, client, signals
    finally:
        os.environ.clear()
        os.environ.update(saved)


def reset(signals: Path) -> Path:
    """Forget the slow targets' calls (a test starts counting from its own first call)."""
    for name in ("calls", "ready"):
        (signals / name).unlink(missing_ok=True)
    return signals


def wait_for(path: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def worker_pids(client: Any) -> dict[str, int]:
    return dict(client.run(os.getpid))


def descendants(pids: dict[str, int]) -> list[psutil.Process]:
    """Live processes below the workers (their case children and helpers)."""
    found = []
    for pid in pids.values():
        try:
            children = psutil.Process(pid).children(recursive=True)
        except psutil.NoSuchProcess:
            continue
        found += [p for p in children if _alive(p)]
    return found


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False

"""A real Dask cluster for the executor tests, and what tests look at on its workers.

The workers are started by the test process, so they inherit its environment: the
``NEBISECT_TEST_*`` files the slow test targets use are set before the cluster starts
and reset per test.
"""

from __future__ import annotations

import os
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
    with distributed.LocalCluster(**options) as cluster, \
            distributed.Client(cluster, set_as_default=False) as client:
        yield cluster, client


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

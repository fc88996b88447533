"""The threads a job may compute on: its share of the cores among the jobs running at once.

A command runs up to ``--jobs`` isolated children at a time (a run's targets and input
sets, a sweep's samples), so a child that took every core would oversubscribe them, and
one that took a single core would leave the others idle when it runs alone. Each job
gets :func:`share` — the cores divided by the jobs running at once, at least one: one
job on two cores computes on both, two jobs on two cores one each. The share is decided
where the jobs are started (a :class:`~nebisect.executors.runner.Runner` gives it to
the isolators it opens), travels with the job (:attr:`Job.threads
<nebisect.isolation.job.Job>`) and is applied in the child around the job's function
(:func:`sharing`) to every thread pool its kernels use:

* ``OMP_NUM_THREADS`` — the simulator's elementwise passes and matrix products read it
  (:mod:`nebisect.mil.blocks`), and so does an OpenMP runtime or torch loaded during
  the job;
* torch's intra-op threads, when the process holds torch already.

The BLAS numpy loads (OpenBLAS) computes on one thread in every helper interpreter,
whatever the share: its own threads change the values of a vector–matrix product (summed
in parts), so a verdict would depend on ``--jobs``; the simulator splits large products
among the share itself, by rows, which changes no value. OpenBLAS reads its thread count
once, when it loads, so :data:`BLAS_THREADS` is set in the helpers' environment
(:func:`~nebisect.isolation.osproc.helper_env`) rather than per job: changing it in a
forked child costs more than a small job's whole prediction.

A persistent worker gets its own settings back after each job. A job that names no
share (an isolator opened without one) runs with the process's defaults.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

#: the variable OpenMP runtimes, torch and the simulator's blockwise passes read
THREADS_VARIABLE = "OMP_NUM_THREADS"
#: the variable and value that hold numpy's OpenBLAS to one thread from its load
BLAS_THREADS = ("OPENBLAS_NUM_THREADS", "1")


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def share(jobs: int, available: int | None = None) -> int:
    """The threads each of ``jobs`` jobs running at once may use on ``available`` cores
    (None: :func:`cores`): an equal share, at least one."""
    return max(1, (cores() if available is None else available) // max(1, jobs))


@contextlib.contextmanager
def sharing(threads: int | None) -> Iterator[None]:
    """Compute on ``threads`` threads in the block (None: as the process is), every pool
    the module docstring lists; the process's own settings are restored after."""
    if threads is None:
        yield
        return
    previous = os.environ.get(THREADS_VARIABLE)
    torch = sys.modules.get("torch")
    torch_threads = torch.get_num_threads() if torch is not None else None
    os.environ[THREADS_VARIABLE] = str(threads)
    try:
        if torch is not None:
            torch.set_num_threads(threads)
        yield
    finally:
        if torch is not None and torch_threads is not None:
            torch.set_num_threads(torch_threads)
        if previous is None:
            os.environ.pop(THREADS_VARIABLE, None)
        else:
            os.environ[THREADS_VARIABLE] = previous

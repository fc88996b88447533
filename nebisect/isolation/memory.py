"""The memory a case may use: its limit, the machine default, the ``--memory`` option.

Every isolated job runs under a memory limit: the bytes its function may add to what
its process holds when the job starts (a fork child inherits the template's numpy,
coremltools or torch, and counting those would make one limit mean different things in
fork, spawn and persistent mode). A job that exhausts it gets the allocator's refusal
— ``MemoryError`` in Python, ``can't allocate memory`` from torch — which the child
reports as an ``oom`` verdict, long before the kernel's out-of-memory killer would
take the machine's other processes with it.

The limit is ``RLIMIT_DATA`` (Linux ≥ 4.7 counts every private writable mapping:
heap, anonymous ``mmap``, thread stacks), not ``RLIMIT_AS``: address space that is only
reserved (glibc's 64 MiB malloc arena per thread, torch's thread pools) counts
against the latter but holds no memory. Measured in a fork child of a torch template
on a 2-core VM, 32 torch threads add 1.5 GB of address space but 0.5 GB of data; a
2 GiB ``torch.empty`` and a 2 GiB ``np.ones`` are refused by both. macOS does not
enforce ``RLIMIT_DATA`` for ``mmap`` (nor ``RLIMIT_AS``): there the limit is only what
the simulator's size check (:mod:`nebisect.mil.sizes`) refuses up front.

The default is :data:`DEFAULT_FRACTION` of the machine's memory (the smaller of its
physical memory and its cgroup's limit); a command's ``--memory SIZE`` replaces it for
the isolators its runner opens (each isolator holds its own limit, :func:`limit_mb`).
Inside a job, :func:`budget` is the job's own limit — what the simulator sizes a
program against.
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator
from pathlib import Path

MIB = 1 << 20
#: the share of the machine's memory a case may use when the command gives no ``--memory``
DEFAULT_FRACTION = 0.5
#: cgroup files that may cap this process's memory below the machine's (v2, then v1)
_CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


class _State:
    budget: int | None = None  # bytes, inside a limited job of this process


_STATE = _State()


def machine_memory() -> int:
    """Bytes of memory this process's machine has: physical memory, or its cgroup's
    limit when that is lower (a container)."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in _CGROUP_LIMITS:
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < physical:
            return int(text)
    return physical


def default_limit() -> int:
    """Bytes a case may use when no ``--memory`` is given: a share of the machine."""
    return int(machine_memory() * DEFAULT_FRACTION)


def limit_mb(size: int | None) -> int:
    """The limit a job carries for ``size`` bytes (``--memory``; None: the machine
    default), in whole MiB (at least 1)."""
    return max(1, (default_limit() if size is None else size) // MIB)


def oom_kills() -> int | None:
    """How many processes the kernel's out-of-memory killer has killed since boot
    (``/proc/vmstat``'s ``oom_kill``, a cgroup's limit included; Linux ≥ 4.13); None
    where the kernel does not say."""
    try:
        text = Path("/proc/vmstat").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None


def budget() -> int:
    """Bytes the running code may allocate: the job's limit inside a limited job, else
    the machine default (a command's own process, e.g. lint reading a program)."""
    return _STATE.budget if _STATE.budget is not None else default_limit()


def _data_bytes() -> int:
    """This process's data segment now (``/proc/self/statm``'s data + stack; 0 where
    /proc is missing)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[5])
    except (OSError, ValueError, IndexError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def _ceiling(memory_mb: int) -> tuple[int, int]:
    """(soft, hard) RLIMIT_DATA that lets this process add ``memory_mb`` MiB to its data."""
    hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
    ceiling = _data_bytes() + memory_mb * MIB
    return (ceiling if hard == resource.RLIM_INFINITY else min(ceiling, hard)), hard


def confine(memory_mb: int) -> None:
    """Let this process add at most ``memory_mb`` MiB to its data from now on, for good:
    a long-lived helper (template, worker) after its imports, so that what it builds and
    keeps (a held source, a rehearsed conversion) is under ``--memory`` as a job is."""
    resource.setrlimit(resource.RLIMIT_DATA, _ceiling(memory_mb))


@contextlib.contextmanager
def limited(memory_mb: int | None) -> Iterator[None]:
    """Let the block add at most ``memory_mb`` MiB to this process's data (RLIMIT_DATA,
    soft limit only, restored after: a persistent worker runs the next job under its
    own); :func:`budget` says so meanwhile."""
    if memory_mb is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    resource.setrlimit(resource.RLIMIT_DATA, _ceiling(memory_mb))
    _STATE.budget = memory_mb * MIB
    try:
        yield
    finally:
        _STATE.budget = None
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))

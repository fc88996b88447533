"""Operating-system plumbing shared by both sides of the process boundary.

Everything here exists so that a case process can never outlive its parent, never
leave a zombie, and can be waited for with a timeout without busy polling or SIGCHLD
handlers (which would interfere with the host program's own children).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import select
import signal
import sys
from pathlib import Path
from typing import Any

from nebisect.isolation.threads import BLAS_THREADS

_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15
_MADV_COLLAPSE = 25
_HUGE_PAGE = 2 << 20
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: allocations from this size on get a mapping of their own (glibc's own ceiling, 64-bit)
OWN_MAPPING_FROM = 32 << 20
#: freed memory kept for reuse before any is given back to the kernel
KEPT_FREE = 1 << 30


@functools.cache
def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def set_pdeathsig(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux).

    Without it, a parent killed with SIGKILL would leave its case processes running
    forever, each possibly stuck in an infinite loop. On other systems this is a no-op;
    the getppid() check callers do right after covers the common case there. The libc
    handle is cached: a fork child then pays one call, not a dlopen.
    """
    if not sys.platform.startswith("linux"):
        return
    if _libc().prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")


def set_process_name(name: str) -> None:
    """Name this process in ``ps``/``/proc/PID/comm`` (Linux; 15 bytes kept)."""
    if sys.platform.startswith("linux"):
        _libc().prctl(_PR_SET_NAME, name.encode()[:15], 0, 0, 0)


def orphaned(expected_parent: int) -> bool:
    """True if the parent died before the death signal was armed (a lost race)."""
    return os.getppid() != expected_parent


def kill_group(pid: int) -> None:
    """SIGKILL process ``pid`` and the process group it leads; gone is not an error.

    Case processes are session leaders (pgid == pid); the extra kill() covers a child
    killed in the instant between fork() and its setsid(). Callers only do this while
    ``pid`` is unreaped (running or a zombie), so neither id can have been reused.
    """
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


class ProcessHandle:
    """A pollable descriptor that becomes readable when process ``pid`` exits.

    Linux: a pidfd. macOS: a kqueue watching NOTE_EXIT (a kqueue's own descriptor is
    pollable). Either way, waiting with a timeout is one poll() call, with no SIGCHLD.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._kqueue: Any = None
        if sys.platform == "darwin":
            self._kqueue = select.kqueue()
            event = select.kevent(
                pid, filter=select.KQ_FILTER_PROC,
                flags=select.KQ_EV_ADD | select.KQ_EV_ONESHOT, fflags=select.KQ_NOTE_EXIT,
            )
            self._kqueue.control([event], 0)
            self._fd = self._kqueue.fileno()
        else:
            self._fd = os.pidfd_open(pid)

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        if self._kqueue is not None:
            self._kqueue.close()
        elif self._fd >= 0:
            os.close(self._fd)
        self._fd = -1


def reap(pid: int) -> int:
    """Wait for our child ``pid``; its exit code, negative for a signal (like Popen)."""
    while True:
        try:
            _, status = os.waitpid(pid, 0)
        except ChildProcessError:
            return 0
        except InterruptedError:
            continue
        return os.waitstatus_to_exitcode(status)


def collapse_to_huge_pages() -> int:
    """Back this process's anonymous memory with 2 MiB pages now (Linux ≥ 6.1); bytes done.

    For a fork template: fork copies one page-table entry per 4 KiB page of private
    memory and the child's exit tears them down again, so a 100 MB template costs that
    for every case. Collapsed, the same memory is ~50 huge-page entries; a child's first
    write to one splits it and copies only the 4 KiB page written, as without it. Measured
    on a 2-core VM with the fuzz template: fork 1.9 → 0.9 ms, child CPU 9.9 → 8.7 ms.
    MADV_COLLAPSE ignores the system's THP policy except ``never``; where it is refused
    (older kernels, no memory to spare) nothing changes but the speed.
    """
    if not sys.platform.startswith("linux"):
        return 0
    madvise = _libc().madvise
    madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    collapsed = 0
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split()
        anonymous = len(fields) == 5 or fields[5] == "[heap]"
        if not (anonymous and fields[1].startswith("rw")):
            continue
        start, end = (int(address, 16) for address in fields[0].split("-"))
        start, end = -(-start // _HUGE_PAGE) * _HUGE_PAGE, end // _HUGE_PAGE * _HUGE_PAGE
        if end > start and madvise(start, end - start, _MADV_COLLAPSE) == 0:
            collapsed += end - start
    return collapsed


def reuse_freed_memory() -> bool:
    """Keep memory this process frees for its next allocations (glibc); False elsewhere.

    A prediction allocates every op's result afresh — arrays of hundreds of KiB to MiB
    for a real model — and frees them by the next prediction. glibc's defaults give such
    memory back to the kernel (a block of 128 KiB or more is a mapping of its own, and
    the heap's top is trimmed past 128 KiB free, both thresholds raised only as large
    blocks are freed), so the next prediction takes a page fault and a zeroed page for
    every 4 KiB it writes. How much depends on what the process freed before: measured
    on MiniLM at sequence 128, sim:fp32 took 56 ms a prediction in a fresh interpreter
    and 46 ms with the freed memory kept (fp16 58 → 56 ms). Memory held at the peak of a
    prediction is unchanged — what is kept is what the next prediction takes again; a
    case process exits after its case, and a persistent worker gives it back after each
    job (:func:`release_freed_memory`).
    """
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, OWN_MAPPING_FROM)
                and mallopt(_M_TRIM_THRESHOLD, KEPT_FREE))


def release_freed_memory() -> None:
    """Give the kernel back the freed memory :func:`reuse_freed_memory` kept (glibc)."""
    malloc_trim = getattr(_libc(), "malloc_trim", None)
    if malloc_trim is not None:
        malloc_trim(0)


def helper_env() -> dict[str, str]:
    """Environment for helper interpreters: ours, plus the directory holding nebisect,
    and numpy's BLAS held to one thread (:data:`~nebisect.isolation.threads.BLAS_THREADS`).

    ``python -m nebisect.isolation.…`` must import nebisect before the parent's
    ``sys.path`` (sent with every request) is applied, even from an uninstalled checkout.
    """
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env[BLAS_THREADS[0]] = BLAS_THREADS[1]
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env


def helper_command(module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", module, *args]

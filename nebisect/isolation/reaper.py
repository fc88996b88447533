"""Every descendant of a case dies with the case, even one that left its process group.

Killing a case's process group misses a grandchild that called ``setsid()`` (or a
daemon that double-forked): it would outlive the case, the command and the CI job. On
Linux the processes that start cases are made *child subreapers*
(``prctl(PR_SET_CHILD_SUBREAPER)``): a descendant orphaned by the death of its parent is
re-parented to the nearest subreaper ancestor instead of init, so it can be found — as
a child — and killed and reaped.

* The fork template and the persistent worker are subreapers; neither has children of
  its own between cases, so after a case *every* remaining child (and its subtree) is a
  stray: :func:`reap_strays`. Checking that there are none is one ``waitid`` call, so
  the common case costs nothing.
* The parent side of spawn and persistent mode (nebisect's own process, or the program
  hosting an :class:`~nebisect.isolate.Isolator`) is a subreaper too, but it has other
  children — helpers, other threads' cases, and, for a host program, its own. Only
  processes started from a case carry :data:`MARK` in their environment (it is set in
  every helper and spawned case, and inherited); the cases and helpers themselves are
  registered while they run (:func:`started`), so :func:`reap_adopted` kills exactly
  the marked, unregistered children: the strays of a case or helper that died.

macOS has no subreaper: there only the process-group kill applies, and a descendant
that calls ``setsid()`` (and so leaves the group) can outlive its case.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

#: Environment variable present in every process a case or helper starts; its value is
#: the pid of the nebisect process that owns them.
MARK = "NEBISECT_CASE_OF"
_PR_SET_CHILD_SUBREAPER = 36
#: How long a round of killing strays may take before giving up (a process stuck in
#: uninterruptible sleep cannot be reaped at all).
PATIENCE = 2.0

_LINUX = sys.platform.startswith("linux")
_registry_lock = threading.Lock()
_registered: set[int] = set()


class _Subreaper:
    pid: int | None = None  # the process that became one (a fork child is not one)


@functools.cache
def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def become_subreaper() -> bool:
    """Make this process adopt its orphaned descendants (Linux); False where impossible.

    Once per process: the flag is not inherited, so a fork of a subreaper (a capture's
    supervisor, :mod:`nebisect.sources.capture`) sets its own."""
    if not _LINUX:
        return False
    if _Subreaper.pid != os.getpid():
        if _libc().prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            return False
        _Subreaper.pid = os.getpid()
    return True


def _parents(live: bool = False) -> dict[int, int]:
    """pid → parent pid for every process in /proc (zombies included unless ``live``)."""
    parents = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_bytes().rsplit(b")", 1)[1].split()
            if not (live and fields[0] == b"Z"):
                parents[int(entry.name)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    return parents


def _subtrees(roots: list[int], parents: dict[int, int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, parent in parents.items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def _kill_children(is_stray: Callable[[int], bool]) -> None:
    """SIGKILL our children that ``is_stray`` names, with all their descendants; reap them.

    Descendants of a killed child are re-parented to us (we are a subreaper) as they
    die, so this repeats until no stray child is left.
    """
    me, killed = os.getpid(), set()
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        parents = _parents()
        strays = [pid for pid, parent in parents.items()
                  if parent == me and (pid in killed or is_stray(pid))]
        if not strays:
            return
        for pid in _subtrees(strays, parents):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
            killed.add(pid)
        for pid in strays:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)


def kill_descendants(pid: int) -> None:
    """SIGKILL every live descendant of ``pid`` (not ``pid`` itself), again until none is
    left (Linux): with ``pid`` a subreaper, whatever their deaths orphan stays under it,
    so a descendant that forks meanwhile or left its process group is found too."""
    if not _LINUX:
        return
    deadline = time.monotonic() + PATIENCE
    while time.monotonic() < deadline:
        live = [p for p in _subtrees([pid], _parents(live=True)) if p != pid]
        if not live:
            return
        for descendant in live:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(descendant, signal.SIGKILL)
        time.sleep(0.005)


def _has_children() -> bool:
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def reap_strays() -> None:
    """Kill and reap every descendant of this process (a template or worker between cases)."""
    if _LINUX and _has_children():
        _kill_children(lambda pid: True)


def _marked(pid: int) -> bool:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"\0{MARK}={os.getpid()}\0".encode() in b"\0" + environ


def reap_adopted() -> None:
    """Kill and reap the strays of dead cases and helpers that this process adopted."""
    if not (_LINUX and become_subreaper()):
        return
    with _registry_lock:
        _kill_children(lambda pid: pid not in _registered and _marked(pid))


def marked_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` plus :data:`MARK`: for a helper or case process this process starts."""
    return {**env, MARK: str(os.getpid())}


@contextlib.contextmanager
def started() -> Iterator[Callable[[int], None]]:
    """Start a case or helper inside this block and register its pid with the callable.

    Starting and registering happen under the lock :func:`reap_adopted` scans under,
    so another thread never takes a process that was just started for a stray.
    """
    become_subreaper()
    with _registry_lock:
        yield _registered.add


def finished(pid: int) -> None:
    """``pid`` was reaped: from now on a marked child with this pid would be a stray."""
    with _registry_lock:
        _registered.discard(pid)

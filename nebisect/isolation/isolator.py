"""The public isolation engine: run one job in a process of its own, get a verdict back.

Modes: ``fork`` (Linux default; a small template forks a child per case), ``spawn``
(macOS default; a fresh interpreter per case — forking after Core ML initialisation
is unsafe), ``persistent`` (one worker runs many cases; every failure it reports is
re-confirmed in a fresh fork/spawn process, recorded as the verdict's ``process.reconfirmed``).

Whatever happens — a crash, a hang, Ctrl-C in the parent — the isolator leaves no
process and no temporary directory behind: an interrupted ``run`` aborts the isolator
(its case and every helper killed at once, not waited for: :meth:`Isolator.abort`),
removes its temp root, and re-raises.

Signals reach the main thread only; an isolator working in another thread is stopped
through its :class:`~nebisect.isolation.cancel.CancelToken` (shared by the isolators of
a thread pool): cancelling wakes every wait at once, the running case is killed, the
helpers stopped and :class:`~nebisect.isolation.cancel.Cancelled` raised.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import weakref
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from nebisect.errors import NebisectError
from nebisect.isolation.cancel import CancelToken
from nebisect.isolation.collect import RawExit, collect
from nebisect.isolation.fork import ForkBackend
from nebisect.isolation.job import Job, Outcome
from nebisect.isolation.memory import limit_mb, oom_kills
from nebisect.isolation.needs import Needs
from nebisect.isolation.persistent import PersistentBackend
from nebisect.isolation.provenance import provenance
from nebisect.isolation.spawn import SpawnBackend
from nebisect.isolation.workspace import Workspace

MODES = ("auto", "fork", "spawn", "persistent")


class Backend(Protocol):
    mode: str

    def expect(self, needs: Needs) -> None: ...

    def run(self, job: Job, case_dir: Path, request: dict[str, Any]) -> RawExit: ...

    def close(self, *, kill: bool = False) -> None: ...


def fresh_mode() -> str:
    """The fresh-process mode this platform defaults to."""
    return "spawn" if sys.platform == "darwin" else "fork"


def refused_mode(mode: str, platform: str) -> str:
    """Why ``mode`` cannot isolate cases on ``platform`` ('' when it can).

    On macOS a forked child of a process that has loaded coremltools'
    ``libcoremlpython`` (Core ML, Objective-C) aborts (coremltools #963, #1819), and
    every nebisect template may load it — the simulator reads packages through it.
    """
    if mode == "fork" and platform == "darwin":
        return ("isolation mode fork is refused on macOS: forking after coremltools has "
                "loaded Core ML aborts the child (coremltools #963, #1819); use spawn "
                "(the default there) or persistent")
    return ""


def _backend(mode: str, workspace: Workspace, cancel: CancelToken, memory_mb: int) -> Backend:
    if mode == "fork":
        return ForkBackend(workspace, cancel, memory_mb)
    if mode == "spawn":
        return SpawnBackend(cancel)
    return PersistentBackend(workspace, cancel, memory_mb)


def _shutdown(backends: list[Backend], workspace: Workspace, kill: bool = False) -> None:
    for backend in backends:
        backend.close(kill=kill)
    workspace.remove()


class Isolator:
    """Runs jobs in isolated processes; reuse one for many cases (helpers stay warm).

    Not thread-safe: one thread at a time may use an isolator. Its helpers are started
    from a thread that lives as long as the process
    (:func:`~nebisect.isolation.helper.launched`), so the isolator may pass from
    thread to thread. ``tmp_dir`` chooses where the per-isolator temp root is created
    (default: /dev/shm on Linux unless TMPDIR is set, else the system temp dir).
    ``cancel`` lets another thread stop this isolator's work (see the module docstring).
    ``memory``: the bytes each job may use unless it names its own limit (``--memory``;
    None: the machine default, :func:`memory.default_limit`). ``threads``: the threads
    each job may compute on unless it names its own (a runner's share of the cores,
    :func:`threads.share`; None: the child's defaults).
    """

    def __init__(self, mode: str = "auto", *, tmp_dir: str | os.PathLike[str] | None = None,
                 cancel: CancelToken | None = None, memory: int | None = None,
                 threads: int | None = None):
        if mode not in MODES:
            raise NebisectError(f"unknown isolation mode {mode!r}: one of {', '.join(MODES)}")
        self.mode = fresh_mode() if mode == "auto" else mode
        refused = refused_mode(self.mode, sys.platform)
        if refused:
            raise NebisectError(refused)
        self._cancel = cancel or CancelToken()
        self.memory = memory
        self.memory_mb = limit_mb(memory)
        self.threads = threads
        self._workspace = Workspace(tmp_dir)
        self._backend = _backend(self.mode, self._workspace, self._cancel, self.memory_mb)
        self._confirm = (
            _backend(fresh_mode(), self._workspace, self._cancel, self.memory_mb)
            if self.mode == "persistent" else None
        )
        self._backends = [b for b in (self._backend, self._confirm) if b is not None]
        # Runs at interpreter exit too: an isolator nobody closed still cleans up.
        weakref.finalize(self, _shutdown, self._backends, self._workspace)

    @property
    def cancel_token(self) -> CancelToken:
        """The token that stops this isolator's work; isolators made to share it stop
        together (a :class:`~nebisect.executors.runner.Runner`'s)."""
        return self._cancel

    def expect(self, needs: Needs) -> None:
        """A hint of the work to come: start the helper that jobs with ``needs`` will
        run in, without waiting for it, so that its imports overlap with whatever the
        caller does next (fork mode; the other modes have nothing to start ahead)."""
        self._backend.expect(needs)

    def run(self, job: Job) -> Outcome:
        """One verdict for ``job``, stamped with provenance and wall time; a job that
        names no memory limit runs under this isolator's (:attr:`memory_mb`), one that
        names no thread share with this isolator's (:attr:`threads`)."""
        started = time.perf_counter()
        if job.memory_mb is None:
            job = replace(job, memory_mb=self.memory_mb)
        if job.threads is None:
            job = replace(job, threads=self.threads)
        try:
            self._cancel.check()
            outcome = self._run_in(self._backend, job)
            if self._confirm is not None:
                outcome = self._reconfirm(job, outcome, self._confirm)
        except BaseException:
            self.abort()
            raise
        outcome.verdict.timings.wall = time.perf_counter() - started
        return outcome

    def close(self) -> None:
        """Stop helper processes and remove the temp root (the isolator stays usable)."""
        _shutdown(self._backends, self._workspace)

    def abort(self) -> None:
        """:meth:`close`, killing the helpers instead of asking them to stop: what an
        interrupted (or failed) run does, so that a helper busy importing, warming up or
        settling after its last case holds nothing up."""
        _shutdown(self._backends, self._workspace, kill=True)

    def __enter__(self) -> Isolator:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Closed; aborted when left by an exception (Ctrl-C: nothing is waited for)."""
        if exc is None:
            self.close()
        else:
            self.abort()

    def _run_in(self, backend: Backend, job: Job) -> Outcome:
        case_dir = self._workspace.new_case_dir()
        request = {"job": job.to_dict(), "sys_path": list(sys.path), "parent": os.getpid()}
        kills = oom_kills()
        try:
            raw = backend.run(job, case_dir, request)
            after = oom_kills()
            raw.oom_killed = None if kills is None or after is None else after > kills
            self._cancel.check()  # a case killed because of the cancellation has no verdict
            outcome = collect(job, case_dir, raw)
        finally:
            shutil.rmtree(case_dir, ignore_errors=True)
        outcome.verdict.provenance.update(provenance(backend.mode))
        return outcome

    def _reconfirm(self, job: Job, outcome: Outcome, confirm: Backend) -> Outcome:
        """A failure seen by the warm worker counts only if a fresh process agrees.

        The fresh verdict is the one reported; the worker's signature is kept beside it
        so that a failure that exists only in a warm process (leaked state) is visible.
        """
        if not outcome.verdict.failed:
            outcome.verdict.process.reconfirmed = False
            return outcome
        fresh = self._run_in(confirm, job)
        fresh.verdict.process.reconfirmed = True
        fresh.verdict.process.persistent_signature = outcome.verdict.signature
        fresh.verdict.provenance["isolation"] = f"persistent, re-confirmed in {confirm.mode}"
        return fresh


def run_isolated(job: Job, mode: str = "auto") -> Outcome:
    """Run one job with a throw-away isolator (prefer a shared one for many jobs)."""
    with Isolator(mode) as isolator:
        return isolator.run(job)

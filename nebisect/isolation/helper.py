"""Parent-side handle on a long-lived helper process (fork template or persistent worker).

Every wait for a helper's message also wakes on the isolator's
:class:`~nebisect.isolation.cancel.CancelToken`, so another thread can stop it at once.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any, TypeVar

from nebisect.isolation import reaper
from nebisect.isolation.cancel import CancelToken
from nebisect.isolation.needs import Needs
from nebisect.isolation.osproc import helper_command, helper_env, kill_group
from nebisect.isolation.watch import LineReader

T = TypeVar("T")

#: Preloading torch + coremltools takes seconds; a helper that is not ready after this
#: is broken, not slow.
STARTUP_SECONDS = 300.0
#: How long a helper asked to stop (its request pipe closed) may take to exit before it
#: is killed: an idle helper exits at once.
STOP_GRACE = 5.0


_launcher: tuple[int, queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]]] | None = None
_launcher_lock = threading.Lock()


def launched(start: Callable[[], T], abandon: Callable[[T], object]) -> T:
    """``start()`` run on this process's launcher thread, which lives as long as the
    process; if the wait for it is interrupted (Ctrl-C), ``abandon`` gets what it
    started.

    A helper dies with its parent, and on Linux "parent" is the *thread* that started
    it (PR_SET_PDEATHSIG): a template started by a pool thread would be killed when the
    pool ends, under an isolator still in use by the thread that owns it. Started from
    the launcher, a helper dies with the process (or when its isolator stops it), so an
    isolator made in one thread can serve threads that come and go (a runner's pool).
    """
    global _launcher
    with _launcher_lock:
        if _launcher is None or _launcher[0] != os.getpid():  # none yet, or forked since
            requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = \
                queue.SimpleQueue()
            threading.Thread(target=_launch_forever, args=(requests,), daemon=True,
                             name="nebisect-launcher").start()
            _launcher = os.getpid(), requests
        queued = _launcher[1]
    done: Future[T] = Future()
    queued.put((start, done))
    try:
        return done.result()
    except BaseException:
        done.add_done_callback(lambda f: None if f.exception() else abandon(f.result()))
        raise


def _launch_forever(requests: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]]) -> None:
    while True:
        start, done = requests.get()
        try:
            done.set_result(start())
        except BaseException as exc:  # handed to the caller, who re-raises it
            done.set_exception(exc)


class Helper:
    """A helper started fresh with ``python -m module CONFIG`` in its own session.

    It receives the parent's pid (to die with it), the parent's ``sys.path`` (so a
    job's module imports the same way it would in the parent), what to provide before
    its first case (:class:`~nebisect.isolation.needs.Needs`) and ``memory_mb``, the
    isolator's memory limit (what a held call that runs user code may use). ``stderr``
    is where its own diagnostics go (a log file, or a pipe the caller drains); ``log``
    names that file, if it is one, for error messages. ``tmp_dir`` is its ``TMPDIR``:
    the caller removes it, also after killing the helper in the middle of writing there.
    """

    def __init__(self, module: str, needs: Needs, stderr: int | IO[bytes],
                 cancel: CancelToken, *, memory_mb: int, tmp_dir: Path,
                 log: Path | None = None) -> None:
        config = {"parent": os.getpid(), "sys_path": list(sys.path), "needs": needs.to_dict(),
                  "memory_mb": memory_mb}
        self.module = module
        self.log = log
        self._cancel = cancel

        def start() -> subprocess.Popen[bytes]:
            with reaper.started() as register:
                process = subprocess.Popen(
                    helper_command(module, json.dumps(config)),
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                    start_new_session=True, close_fds=True,
                    env=reaper.marked_env({**helper_env(), "TMPDIR": str(tmp_dir)}),
                    bufsize=0,
                )
                register(process.pid)
            return process

        def abandon(process: subprocess.Popen[bytes]) -> None:
            kill_group(process.pid)
            process.wait()
            reaper.finished(process.pid)

        self.process = launched(start, abandon)
        assert self.process.stdin is not None and self.process.stdout is not None
        self._requests: IO[bytes] = self.process.stdin
        self.responses = LineReader(self.process.stdout.fileno())

    @property
    def pid(self) -> int:
        return self.process.pid

    def send(self, message: dict[str, Any]) -> bool:
        """Write one request; False if the helper is gone (its pipe is broken)."""
        try:
            self._requests.write((json.dumps(message) + "\n").encode())
        except (BrokenPipeError, ValueError):
            return False
        return True

    def receive(self, deadline: float | None) -> dict[str, Any] | None:
        """The next message; None on timeout or when the helper has died.

        Raises :class:`~nebisect.isolation.cancel.Cancelled` when cancelled meanwhile.
        """
        line = self.responses.readline(deadline, (self._cancel.fd,))
        self._cancel.check()
        return json.loads(line) if line else None

    def await_ready(self) -> bool:
        message = self.receive(time.monotonic() + STARTUP_SECONDS)
        return message is not None and "ready" in message

    def stop(self, grace: float = STOP_GRACE) -> int:
        """Close the request pipe (the helper's cue to kill its case and exit), reap it.

        A helper that does not exit within ``grace`` is killed with its process group;
        whatever its cases left behind that it did not reap itself is reaped here.
        """
        with contextlib.suppress(OSError):
            self._requests.close()
        try:
            code = self.process.wait(grace)
        except subprocess.TimeoutExpired:
            kill_group(self.pid)
            code = self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        reaper.finished(self.pid)
        reaper.reap_adopted()
        return code

"""Waiting for a process with a timeout while draining its stderr, without busy polling.

One ``poll()`` covers the process's exit handle (pidfd), its stderr pipe and "wake"
descriptors (the parent's control pipe, a child's done pipe, a worker's responses).
The stderr pipe is drained into a :class:`StderrSink` that keeps a bounded head and
tail, so a child printing 50 MB of diagnostics can neither fill the disk nor block on
a full pipe, and the bytes that matter most — the last ones before a crash, where
faulthandler and native libraries write — are always kept.
"""

from __future__ import annotations

import math
import os
import select
import stat
import time
from collections.abc import Callable
from pathlib import Path

from nebisect.errors import NebisectError
from nebisect.files import read_untrusted
from nebisect.isolation.osproc import ProcessHandle, kill_group

#: What :meth:`Watch.wait` returns when it was not woken by one of its descriptors.
EXITED, TIMEOUT = "exited", "timeout"

HEAD_BYTES = 64 * 1024
TAIL_BYTES = 8 * 1024
_CHUNK = 64 * 1024


class StderrSink:
    """Bounded capture of a byte stream into ``path``: first HEAD and last TAIL bytes.

    Whatever falls between is counted and replaced by a one-line marker when the sink
    is closed, so the file never exceeds about HEAD + TAIL bytes.
    """

    def __init__(self, path: Path, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self.path = path
        self.total = 0
        self._head = head
        self._tail_limit = tail
        self._tail = bytearray()
        self._file: int | None = None

    def feed(self, data: bytes) -> None:
        if self.total < self._head:
            self._write(data[: self._head - self.total])
        self._tail += data
        del self._tail[: -self._tail_limit]
        self.total += len(data)

    def close(self) -> None:
        beyond_head = self.total - self._head
        if beyond_head > 0:
            tail = bytes(self._tail[-min(len(self._tail), beyond_head):])
            elided = beyond_head - len(tail)
            if elided:
                self._write(f"\n[nebisect: {elided} bytes of stderr elided]\n".encode())
            self._write(tail)
        if self._file is not None and self._file >= 0:
            os.close(self._file)
        self._file = None

    def _write(self, data: bytes) -> None:
        if self._file is None:
            self._file = _open_capture(self.path)
        if self._file < 0:
            return
        view = memoryview(data)
        while view:
            view = view[os.write(self._file, view):]


def _open_capture(path: Path) -> int:
    """The capture file for appending, or -1 (the bytes are then not written) when what is
    at ``path`` is no regular file: the case child may have put a symlink to one of the
    user's files there, or a FIFO, and the capture must not write through it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(path, flags | os.O_CLOEXEC, 0o600)
    except OSError:
        return -1
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return -1
    return fd


def read_tail(path: Path, limit: int = TAIL_BYTES) -> str:
    """The last ``limit`` bytes of a captured stream, as text ('' if nothing came, or if
    what is there is no regular file: a case child may have replaced it)."""
    try:
        return read_untrusted(path, limit, tail=True).decode(errors="replace")
    except (OSError, NebisectError):
        return ""


def _ms(seconds: float) -> int:
    return max(0, math.ceil(seconds * 1000))


class LineReader:
    """Newline-framed messages from a pipe, with an optional deadline per line."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = bytearray()

    def readline(
        self, deadline: float | None = None, wake_fds: tuple[int, ...] = ()
    ) -> bytes | None:
        """The next line without its newline; ``b''`` at EOF, ``None`` on timeout or
        when one of ``wake_fds`` became readable first."""
        while b"\n" not in self._buffer:
            if deadline is not None or wake_fds:
                poller = select.poll()
                for fd in (self.fd, *wake_fds):
                    poller.register(fd, select.POLLIN)
                timeout = None if deadline is None else _ms(deadline - time.monotonic())
                ready = {fd for fd, _ in poller.poll(timeout)}
                if self.fd not in ready:
                    return None
            chunk = os.read(self.fd, _CHUNK)
            if not chunk:
                return b""
            self._buffer += chunk
        line, _, rest = self._buffer.partition(b"\n")
        self._buffer = bytearray(rest)
        return bytes(line)


class Watch:
    """Supervises one child process: its exit handle, its stderr pipe, its reaping.

    ``reaper`` waits for the (already exited or killed) process and returns its exit
    code, negative for a signal; it is ``os.waitpid`` for our own forks, ``Popen.wait``
    for processes started through subprocess.
    """

    def __init__(self, pid: int, stderr_fd: int | None, reaper: Callable[[], int]) -> None:
        self.pid = pid
        self.stderr_fd = stderr_fd
        self._reaper = reaper
        self._handle = ProcessHandle(pid)

    def wait(
        self, sink: StderrSink, deadline: float, wake_fds: tuple[int, ...] = ()
    ) -> int | str:
        """Block until the process exits (:data:`EXITED`), the deadline passes
        (:data:`TIMEOUT`) or one of ``wake_fds`` is readable (that descriptor)."""
        poller = select.poll()
        for fd in (self._handle.fileno(), *wake_fds):
            poller.register(fd, select.POLLIN)
        if self.stderr_fd is not None:
            poller.register(self.stderr_fd, select.POLLIN)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return TIMEOUT
            ready = {fd for fd, _ in poller.poll(_ms(remaining))}
            if self.stderr_fd is not None and self.stderr_fd in ready:
                stderr_fd = self.stderr_fd
                if not self._pump(sink):
                    poller.unregister(stderr_fd)
            woken = [fd for fd in wake_fds if fd in ready]
            if woken:
                return woken[0]
            if self._handle.fileno() in ready:
                return EXITED

    def drain(self, sink: StderrSink | None, seconds: float = 0.0) -> None:
        """Move what the stderr pipe holds into ``sink`` (None: discard it), waiting up to
        ``seconds`` for EOF."""
        deadline = time.monotonic() + seconds
        while self.stderr_fd is not None:
            poller = select.poll()
            poller.register(self.stderr_fd, select.POLLIN)
            if not poller.poll(_ms(deadline - time.monotonic())) or not self._pump(sink):
                return

    def finish(self, sink: StderrSink | None, grace: float = 1.0) -> int:
        """Kill whatever is left of the process group, drain stderr, reap; the exit code.

        The leader is unreaped until the reaper runs, so its group id is still ours to
        kill: grandchildren the case left behind die with it.
        """
        kill_group(self.pid)
        self.drain(sink, grace)
        code = self._reaper()
        self.close()
        return code

    def close(self) -> None:
        self._handle.close()
        if self.stderr_fd is not None:
            os.close(self.stderr_fd)
            self.stderr_fd = None

    def _pump(self, sink: StderrSink | None) -> bool:
        """One read from stderr into the sink; False (and the pipe closed) at EOF."""
        assert self.stderr_fd is not None
        data = os.read(self.stderr_fd, _CHUNK)
        if data:
            if sink is not None:
                sink.feed(data)
            return True
        os.close(self.stderr_fd)
        self.stderr_fd = None
        return False

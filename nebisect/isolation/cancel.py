"""Cancelling isolated work that other threads are waiting on, at once.

Signal handlers run in the main thread only, so a Ctrl-C or SIGTERM during a
``--jobs N`` run interrupts the main thread while the worker threads sit in ``poll()``
waiting for their cases — for as long as ``--timeout``. A :class:`CancelToken` is the
way to reach them: every wait of an isolator built with the token also polls the
token's pipe, so :meth:`CancelToken.cancel` (from any thread) wakes them all; each then
kills and reaps its case as for a timeout, and raises :class:`Cancelled` instead of
reporting a verdict. Once cancelled, a token stays cancelled: an isolator using it
refuses new work.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref


class Cancelled(BaseException):
    """The isolated work was cancelled from another thread; no verdict exists.

    A ``BaseException``, like ``KeyboardInterrupt``: code that turns ordinary errors
    into verdicts (``except Exception``) must not turn a cancellation into one.
    """


def _close(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


class CancelToken:
    """A flag that can be set once from any thread and waited on with ``poll()``."""

    def __init__(self) -> None:
        self._read, self._write = os.pipe()
        self._lock = threading.Lock()
        self._cancelled = False
        weakref.finalize(self, _close, self._read, self._write)

    @property
    def fd(self) -> int:
        """Readable once cancelled (and from then on): add it to every wait."""
        return self._read

    def cancel(self) -> None:
        with self._lock:
            if not self._cancelled:
                self._cancelled = True
                os.write(self._write, b"!")

    def check(self) -> None:
        """Raise :class:`Cancelled` if the token was cancelled."""
        if self._cancelled:
            raise Cancelled

"""Ctrl-C, SIGTERM and SIGHUP all mean "stop now, clean up, say what was done".

CI sends SIGTERM when a job is cancelled or times out, a closed terminal sends SIGHUP;
by default either kills Python on the spot, so no ``finally`` runs and every temp dir,
tmpfs workspace and helper process is left behind. :func:`install` makes all three
raise :class:`Interrupted` in the main thread instead — a ``KeyboardInterrupt``, so
every cleanup path that already handles Ctrl-C (context managers, the isolator's
kill-and-reap, the thread pools' cancellation) handles the other two as well.

Only the first signal raises: a second Ctrl-C or a SIGTERM arriving while that cleanup
runs would otherwise abort it half-way and leave the debris this module exists to
prevent. Exit codes follow the shell convention, 128 + the signal number (130, 143, 129).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread by the first of Ctrl-C, SIGTERM or SIGHUP."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signal.Signals(signum).name)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class _State:
    received: Interrupted | None = None


def _raise_once(signum: int, frame: FrameType | None) -> None:
    if _State.received is None:
        _State.received = Interrupted(signum)
        raise _State.received


def install() -> None:
    """Handle SIGINT, SIGTERM and SIGHUP in this process (call from the main thread).

    A signal this process was started with ignored stays ignored (``nohup`` ignores
    SIGHUP, a shell's background job SIGINT): that was the caller's choice.
    """
    _State.received = None
    for signum in HANDLED:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, _raise_once)


@contextlib.contextmanager
def terminations_interrupt() -> Iterator[None]:
    """For the block, SIGTERM and SIGHUP left at their default action (which ends the
    process on the spot, no cleanup run) raise :class:`Interrupted` as :func:`install`
    makes them; their default is restored after. For an API call inside a host program
    (a script, a notebook kernel): its handlers, and Ctrl-C's, are left as they are. In
    the main thread only (Python runs handlers there); elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    taken = [signum for signum in HANDLED[1:] if signal.getsignal(signum) is signal.SIG_DFL]
    if taken:
        _State.received = None
    for signum in taken:
        signal.signal(signum, _raise_once)
    try:
        yield
    finally:
        for signum in taken:
            signal.signal(signum, signal.SIG_DFL)


def received() -> Interrupted | None:
    """The interruption this process got since :func:`install`, if any."""
    return _State.received


def describe(stop: BaseException) -> str:
    """What stopped the work, for "not run" notes: the signal's name or Ctrl-C."""
    if isinstance(stop, Interrupted) and stop.signum != signal.SIGINT:
        return f"interrupted by {stop.name}"
    return "interrupted"

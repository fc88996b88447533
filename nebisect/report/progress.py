"""Progress of a long command, in a terminal and where there is none (CI logs).

In a terminal, a live status line (rich) shows the latest message. With stderr
redirected — a CI job, ``2> log`` — a live line prints nothing at all, and a long run
would look hung until it ends; there :class:`PlainProgress` writes the latest message as
one plain line, at most every :data:`PLAIN_INTERVAL` seconds
(``NEBISECT_PROGRESS_INTERVAL``) and never before the first interval (a command that
fails at once still prints its one error line alone). Messages come from worker threads
too (``run --jobs``), hence the lock.

API::

    with progress_line(console, "running") as progress:
        progress("exploring sim:fp16: 12/40 predictions · 0 failing")
        progress.stop()   # before printing a result inside the block
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO, Any

from rich.console import Console
from rich.status import Status

#: seconds between two plain progress lines (``NEBISECT_PROGRESS_INTERVAL`` overrides)
PLAIN_INTERVAL = 10.0
INTERVAL_ENV = "NEBISECT_PROGRESS_INTERVAL"


def plain_interval() -> float:
    """:data:`PLAIN_INTERVAL`, or the positive number of seconds the environment sets."""
    try:
        chosen = float(os.environ.get(INTERVAL_ENV, PLAIN_INTERVAL))
    except ValueError:
        return PLAIN_INTERVAL
    return chosen if 0 < chosen < 86400 else PLAIN_INTERVAL


class PlainProgress:
    """The latest message as ``nebisect: [42 s] message``, at most every ``interval``."""

    def __init__(self, stream: IO[str], interval: float = PLAIN_INTERVAL,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream, self.interval, self.clock = stream, interval, clock
        self.started = self.last = clock()
        self._lock = threading.Lock()

    def stop(self) -> None:
        """Nothing is live: nothing to take down."""

    def __call__(self, message: str) -> None:
        with self._lock:
            now = self.clock()
            if now - self.last < self.interval:
                return
            self.last = now
            self.show(f"nebisect: [{now - self.started:.0f} s] {message}")

    def show(self, line: str) -> None:
        """Write one progress line."""
        print(line, file=self.stream, flush=True)


class LiveProgress:
    """The latest message on a live status line (a terminal)."""

    def __init__(self, status: Status) -> None:
        self.status = status

    def stop(self) -> None:
        """Take the line down (before printing a result while it is live)."""
        self.status.stop()

    def __call__(self, message: str) -> None:
        self.status.update(message)


@contextmanager
def progress_line(console: Console, first: str) -> Iterator[LiveProgress | PlainProgress]:
    """A progress callable: a live status in a terminal, else :class:`PlainProgress`."""
    if console.is_terminal:
        with console.status(first) as status:
            yield LiveProgress(status)
        return
    yield PlainProgress(console.file, plain_interval())


def in_notebook() -> bool:
    """Is this process a Jupyter kernel (IPython with a kernel attached)?"""
    shell = getattr(sys.modules.get("IPython"), "get_ipython", lambda: None)()
    return shell is not None and getattr(shell, "kernel", None) is not None


class NotebookProgress(PlainProgress):
    """The latest message as one output line of the running cell, replaced in place
    (an IPython display handle): no terminal escapes in what the notebook keeps, at
    most every ``interval`` seconds."""

    def __init__(self, handle: Any, interval: float = 0.5,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(sys.stderr, interval, clock)
        self.handle = handle

    @classmethod
    @contextmanager
    def shown(cls, first: str) -> Iterator[NotebookProgress]:
        """A progress line under the running cell, saying ``first`` until the next
        message, and how long the command took when it is done."""
        from IPython.display import display

        shown = cls(display(_Line(f"nebisect: {first}"), display_id=True))
        yield shown
        shown.show(f"nebisect: done in {shown.clock() - shown.started:.0f} s")

    def show(self, line: str) -> None:
        """Replace the cell's progress line."""
        self.handle.update(_Line(line))


class _Line:
    """One line of text, shown as text in a notebook (and in its saved outputs)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

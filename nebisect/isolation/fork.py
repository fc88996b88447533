"""Fork mode (Linux default): one template per set of needs forks one child per case.

A job runs in a template whose needs cover its own
(:meth:`~nebisect.isolation.needs.Needs.covers`), started for it if none does. A caller
that knows which template it will need first can :meth:`ForkBackend.expect` it: the
template then imports while the caller does other work.

The template does the supervising (timeout, stderr capture, reaping) because only a
process's parent can reap it; this side sends the request and waits for the report,
with a safety margin in case the template itself hangs.

Templates are kept for reuse, at most :data:`MAX_TEMPLATES` of them in this process,
whatever its isolators (:data:`ROSTER`): a command that judges many sources (the atlas:
a template holds each torch source that builds slowly, and on a loaded machine every
build is slow, :class:`~nebisect.isolation.needs.Hold`) would otherwise keep one
process of hundreds of MB per source alive. Starting one more stops the least recently
used idle one, whichever isolator started it, and reaps it; when every one is busy
(a case in flight on each of a runner's threads) the start waits for one to finish. A
template started ahead (:meth:`ForkBackend.expect`) counts from its start: a hint that
finds no room is dropped.

Closing the isolator asks each template to stop (its request pipe closes; an idle
template exits at once). An interrupted or cancelled run aborts the isolator instead,
which kills them (``close(kill=True)``), and a template still starting is always
killed: a template may be importing (its needs, the job's module), rehearsing a
conversion (a warm-up) or reaping its last case and forking the next child, and reads
no request meanwhile — waiting for it would hold up a stopped command for seconds.
Killing one leaves nothing behind: its children die with it (parent-death signal), what
a case started is adopted and reaped here (:mod:`~nebisect.isolation.reaper`), and
what it wrote to temp is in the isolator's workspace.
"""

from __future__ import annotations

import itertools
import threading
import time
from pathlib import Path
from typing import Any

from nebisect.errors import NebisectError
from nebisect.isolation.cancel import CancelToken
from nebisect.isolation.collect import RawExit
from nebisect.isolation.helper import STARTUP_SECONDS, STOP_GRACE, Helper
from nebisect.isolation.job import Job
from nebisect.isolation.needs import Needs
from nebisect.isolation.watch import read_tail
from nebisect.isolation.workspace import Workspace

#: What every helper imports before its first case, whatever the job needs. zipfile is
#: what np.savez imports lazily; importing it in every child cost ~3 ms.
CORE_NEEDS = Needs(imports=("numpy", "zipfile", "nebisect.verdict", "nebisect.case",
                            "nebisect.isolation.child"))
#: How long past the job's timeout the template may take to report before it is killed.
REPORT_GRACE = 10.0
#: Templates a backend keeps: more than one command's kinds of job need (conversion,
#: reference with its source held, evaluation, coremltools alone), few enough that a
#: sweep of many sources does not hold a process (hundreds of MB) per source.
MAX_TEMPLATES = 6


Slot = tuple["ForkBackend", Needs]


class TemplateRoster:
    """Every fork template of this process, ready or starting, least recently used
    first, at most ``limit`` of them; a template serving a job is busy and stays.

    One lock guards the roster and every backend's templates, so that a start in one
    thread can stop another thread's idle template.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.lock = threading.Condition(threading.RLock())
        self._slots: dict[Slot, None] = {}
        self._busy: set[Slot] = set()

    def __len__(self) -> int:
        return len(self._slots)

    def admit(self, slot: Slot, cancel: CancelToken | None) -> bool:
        """Make room for ``slot`` and enter it, busy when ``cancel`` is given (a job's
        template: waits, cancellably, while every template is busy) and idle when not
        (a hint: False, nothing entered, when there is no idle one to stop). Call with
        :attr:`lock` held."""
        while len(self._slots) >= self.limit:
            idle = next((s for s in self._slots if s not in self._busy), None)
            if idle is not None:
                del self._slots[idle]
                idle[0].evict(idle[1])
                continue
            if cancel is None:
                return False
            cancel.check()
            self.lock.wait(0.2)
        self._slots[slot] = None
        if cancel is not None:
            self._busy.add(slot)
        return True

    def use(self, slot: Slot) -> None:
        """``slot`` serves a job: busy, and the most recently used."""
        self._slots.pop(slot)
        self._slots[slot] = None
        self._busy.add(slot)

    def release(self, slot: Slot) -> None:
        """``slot``'s job is over: it may be stopped to make room."""
        with self.lock:
            self._busy.discard(slot)
            self.lock.notify_all()

    def leave(self, slot: Slot) -> None:
        """``slot``'s template is stopped (or never started)."""
        with self.lock:
            self._slots.pop(slot, None)
            self._busy.discard(slot)
            self.lock.notify_all()


#: the templates of this process: every isolator's count against one bound
ROSTER = TemplateRoster(MAX_TEMPLATES)


class ForkBackend:
    mode = "fork"

    def __init__(self, workspace: Workspace, cancel: CancelToken, memory_mb: int) -> None:
        self._workspace = workspace
        self._cancel = cancel
        self._memory_mb = memory_mb
        self._templates: dict[Needs, Helper] = {}
        #: started, not yet known to be ready (see :meth:`expect`)
        self._starting: dict[Needs, Helper] = {}
        self._started = itertools.count(1)

    def expect(self, needs: Needs) -> None:
        """Start the template for ``needs`` now, unless one that covers it exists or
        the roster has no room; the first job that needs it waits for it to be ready."""
        key = needs.template_key
        with ROSTER.lock:
            if self._covering(key) is None and ROSTER.admit((self, key), None):
                self._starting[key] = self._start(key)

    def run(self, job: Job, case_dir: Path, request: dict[str, Any]) -> RawExit:
        wanted = job.needs.template_key
        with ROSTER.lock:
            key = self._covering(wanted) or wanted
        message = {"case_dir": str(case_dir), "request": request}
        template = self._template(key)
        try:
            if not template.send(message):
                self._discard(key)
                template = self._template(key)
                template.send(message)
            report = template.receive(time.monotonic() + job.timeout + REPORT_GRACE)
        finally:
            ROSTER.release((self, key))
        if report is None:
            code = self._discard(key)
            return RawExit(None, failure=f"isolation template stopped responding (exit {code})")
        return RawExit(report["exit_code"], report["timed_out"], report["stderr_bytes"])

    def close(self, *, kill: bool = False) -> None:
        """Stop every template: ask the ready ones (``kill``: kill them), kill the ones
        still starting (importing, so not reading their requests: no case to finish)."""
        with ROSTER.lock:
            ready, self._templates = self._templates, {}
            starting, self._starting = self._starting, {}
            for key in [*ready, *starting]:
                ROSTER.leave((self, key))
        for template in ready.values():
            template.stop(grace=0 if kill else STOP_GRACE)
        for template in starting.values():
            template.stop(grace=0)

    def evict(self, key: Needs) -> None:
        """Stop and reap the idle template serving ``key`` (the roster makes room; its
        lock held): a ready one exits when its request pipe closes, one still starting
        is killed."""
        if key in self._templates:
            self._templates.pop(key).stop()
        else:
            self._starting.pop(key).stop(grace=0)

    def _covering(self, key: Needs) -> Needs | None:
        """The key of a running or starting template that covers ``key`` (its own
        first), or None."""
        candidates = [key, *self._templates, *self._starting]
        return next((k for k in candidates
                     if (k in self._templates or k in self._starting) and k.covers(key)),
                    None)

    def _start(self, key: Needs) -> Helper:
        log = self._workspace.root / f"template-{next(self._started)}.log"
        with log.open("ab") as stderr:
            return Helper("nebisect.isolation.template", key.adding(CORE_NEEDS), stderr,
                          self._cancel, memory_mb=self._memory_mb,
                          tmp_dir=self._workspace.helper_tmp(), log=log)

    def _template(self, key: Needs) -> Helper:
        """The ready template for ``key``, started if need be, busy in the roster."""
        slot = (self, key)
        with ROSTER.lock:
            template = self._templates.get(key)
            if template is not None:
                ROSTER.use(slot)
                return template
            template = self._starting.pop(key, None)
            if template is not None:
                ROSTER.use(slot)
            else:
                ROSTER.admit(slot, self._cancel)
        ready = False
        try:
            template = template or self._start(key)
            ready = template.await_ready()
        finally:
            if not ready:
                ROSTER.leave(slot)
                if template is not None:
                    code = template.process.poll()
                    template.stop(grace=0)  # still importing: it would not read a stop
        if not ready:
            why = (f"not ready after {STARTUP_SECONDS:.0f} s" if code is None
                   else f"exited with code {code}")
            tail = read_tail(template.log, 2000).strip() if template.log else ""
            raise NebisectError(f"isolation template failed to start ({why})"
                                + (f": {tail}" if tail else ""))
        with ROSTER.lock:
            self._templates[key] = template
        return template

    def _discard(self, key: Needs, grace: float = STOP_GRACE) -> int:
        """Stop the template serving ``key`` (its exit code): an idle one exits when its
        request pipe closes; one not gone after ``grace`` seconds is killed."""
        with ROSTER.lock:
            template = self._templates.pop(key)
            ROSTER.leave((self, key))
        return template.stop(grace)

"""The fork-mode template: a small long-lived process that forks one child per case.

Started fresh (``python -m nebisect.isolation.template CONFIG``), it imports numpy,
nebisect's core and what the jobs need once (and each job's own module on first use,
with the warm-up hooks its needs name: :func:`~nebisect.isolation.server.prepare_job`), then
forks: a numpy-only fork costs about a millisecond, where a fresh interpreter that
imports coremltools costs seconds.

Before the first fork the template's memory is collapsed into huge pages
(:func:`~nebisect.isolation.osproc.collapse_to_huge_pages`): fork and exit then handle
a few dozen page-table entries instead of tens of thousands.

The child for the next case is forked *ahead* of it, right after the previous report
went out: the fork and the child's set-up overlap with the parent's collecting, and a
waiting child woken by its request is scheduled at once on a busy machine, where a
brand-new process queues behind the running ones.

The template supervises each child itself — pidfd + poll for the timeout, the stderr
pipe drained into a bounded capture, the process group killed and the child reaped —
and reports to the parent: the exit code, or, for a child that signalled its result is
written, nothing more (that child is reaped after the report, off the critical path).
Closing its request pipe (the parent closing its isolator) kills the running case,
retires the spare child and ends the template. A parent interrupted in the middle of a
case does not ask: it kills the template (:mod:`~nebisect.isolation.fork`), whose
children then die with it (parent-death signal) and whose strays the parent adopts.

The template is a child subreaper (Linux): a grandchild that left the case's process
group with ``setsid()`` is re-parented to it when its parent dies, and killed and
reaped with every other stray before the next child is forked
(:mod:`~nebisect.isolation.reaper`).

Protocol (JSON lines): parent → ``{"case_dir", "request"}``; template → ``{"ready"}``
once, then per case ``{"exit_code", "timed_out", "aborted", "stderr_bytes"}`` (exit
code null when the child finished with a result).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nebisect.isolation.child import spare_child
from nebisect.isolation.job import CaseFiles
from nebisect.isolation.osproc import collapse_to_huge_pages, kill_group, reap
from nebisect.isolation.reaper import become_subreaper, reap_strays
from nebisect.isolation.server import prepare_job, send, start_helper
from nebisect.isolation.watch import TIMEOUT, LineReader, StderrSink, Watch

_REQUESTS, _RESPONSES = 0, 1


@dataclass
class Spare:
    """A forked child waiting for its case: its pid and its request, stderr, done pipes."""

    pid: int
    request_fd: int
    stderr_fd: int
    done_fd: int

    @classmethod
    def fork(cls) -> Spare:
        # Everything alive now belongs to the template: keep the child's garbage
        # collector from walking it (a full collection touches, so copies, every page).
        gc.freeze()
        request_read, request_write = os.pipe()
        stderr_read, stderr_write = os.pipe()
        done_read, done_write = os.pipe()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            for fd in (request_write, stderr_read, done_read):
                os.close(fd)
            spare_child(os.getppid(), request_read, stderr_write, done_write)
        for fd in (request_read, stderr_write, done_write):
            os.close(fd)
        return cls(pid, request_write, stderr_read, done_read)

    def hand_over(self, message: bytes) -> bool:
        """Send the case; False if this spare died while waiting (it is then reaped)."""
        data = memoryview(message)
        try:
            while data:
                data = data[os.write(self.request_fd, data):]
        except BrokenPipeError:
            self.retire()
            return False
        os.close(self.request_fd)
        return True

    def retire(self) -> None:
        """Kill and reap a spare that will not run a case."""
        for fd in (self.request_fd, self.stderr_fd, self.done_fd):
            os.close(fd)
        kill_group(self.pid)
        reap(self.pid)


class Template:
    def __init__(self) -> None:
        self._spare: Spare | None = None
        self._finished: Watch | None = None

    def run_case(self, line: bytes) -> dict[str, Any]:
        """Hand the case to the spare child and supervise it until it is done or dead.

        The request goes to the child as the parent sent it, without re-encoding.
        """
        message = json.loads(line)
        request = message["request"]
        # The job's own module is imported (and warmed up) here once, so that children
        # have it: for nebisect.evaluate.judge that is about 70 ms per child, for a
        # conversion seconds. The spare forked before is retired: this case's child is
        # forked after the warm-up too.
        sys.path[:] = request["sys_path"]
        if prepare_job(request["job"]) and self._spare:
            self._spare.retire()
            self._spare = None
        child = self._take(line)
        watch = Watch(child.pid, child.stderr_fd, reaper=lambda: reap(child.pid))
        sink = StderrSink(Path(message["case_dir"]) / CaseFiles.STDERR)
        deadline = time.monotonic() + float(request["job"]["timeout"])
        wake: tuple[int, ...] = (child.done_fd, _REQUESTS)
        while (how := watch.wait(sink, deadline, wake)) == child.done_fd:
            if os.read(child.done_fd, 1):
                break
            wake = (_REQUESTS,)  # died without finishing: the pidfd tells how
        os.close(child.done_fd)
        report = {"exit_code": None, "timed_out": how == TIMEOUT,
                  "aborted": how == _REQUESTS, "stderr_bytes": 0}
        if how == child.done_fd:
            # The result is on disk: report now, reap after the report went out.
            watch.drain(sink)
            self._finished = watch
        else:
            report["exit_code"] = watch.finish(sink)
        sink.close()
        report["stderr_bytes"] = sink.total
        return report

    def settle(self) -> None:
        """Between cases: reap the last child, its group and every stray descendant,
        fork the next spare."""
        if self._spare is None:
            self._reap_finished()
            self._spare = Spare.fork()

    def close(self) -> None:
        if self._spare is not None:
            self._spare.retire()
            self._spare = None
        self._reap_finished()

    def _reap_finished(self) -> None:
        """With no spare alive, every child left is the finished case or its debris."""
        if self._finished is not None:
            self._finished.finish(None)
            self._finished = None
        reap_strays()

    def _take(self, message: bytes) -> Spare:
        for _ in range(2):
            self.settle()
            child, self._spare = self._spare, None
            assert child is not None
            if child.hand_over(message):
                return child
        raise RuntimeError("case processes die before their case arrives; see above")


def main() -> None:
    start_helper()
    become_subreaper()
    collapse_to_huge_pages()
    template = Template()
    template.settle()
    requests = LineReader(_REQUESTS)
    send(_RESPONSES, {"ready": os.getpid()})
    try:
        while line := requests.readline():
            report = template.run_case(line)
            send(_RESPONSES, report)
            if report["aborted"]:
                return
            template.settle()
    finally:
        template.close()


if __name__ == "__main__":
    main()

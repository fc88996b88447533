"""Persistent mode (fuzzing throughput): one worker process runs case after case.

The worker is this process's child, so this side supervises it directly: one poll over
the worker's exit handle, its stderr pipe and its response pipe. A worker that dies or
times out is reaped and replaced on the next case; so is one woken by the isolator's
cancel token (another thread stopping the work). The verdicts it produces are not
final: the isolator re-confirms every failure in a fresh process.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path
from typing import Any

from nebisect.errors import NebisectError
from nebisect.isolation.cancel import CancelToken
from nebisect.isolation.collect import RawExit
from nebisect.isolation.fork import CORE_NEEDS
from nebisect.isolation.helper import STARTUP_SECONDS, Helper
from nebisect.isolation.job import CaseFiles, Job
from nebisect.isolation.needs import Needs
from nebisect.isolation.watch import TIMEOUT, StderrSink, Watch, read_tail
from nebisect.isolation.workspace import Workspace


class _Worker:
    """A started worker: the helper process, its supervision, its case count."""

    def __init__(self, needs: Needs, log: Path, tmp_dir: Path,
                 cancel: CancelToken, memory_mb: int) -> None:
        read_end, write_end = os.pipe()
        try:
            self.helper = Helper("nebisect.isolation.worker", needs.adding(CORE_NEEDS), write_end,
                                 cancel, memory_mb=memory_mb, tmp_dir=tmp_dir)
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        self.watch = Watch(self.helper.pid, read_end, self.helper.process.wait)
        self.cases = 0
        sink = StderrSink(log)
        ready = False
        try:
            deadline = time.monotonic() + STARTUP_SECONDS
            responses = self.helper.responses.fd
            how = self.watch.wait(sink, deadline, (responses, cancel.fd))
            ready = how == responses and self.helper.receive(deadline) is not None
        finally:
            if not ready:
                self.kill(sink)
            sink.close()
        cancel.check()
        if not ready:
            raise NebisectError(f"persistent worker failed to start: {read_tail(log, 2000)}")

    def kill(self, sink: StderrSink | None) -> int:
        code = self.watch.finish(sink)
        self.helper.stop(grace=0.0)
        return code


class PersistentBackend:
    mode = "persistent"

    def __init__(self, workspace: Workspace, cancel: CancelToken, memory_mb: int) -> None:
        self._workspace = workspace
        self._cancel = cancel
        self._memory_mb = memory_mb
        self._worker: _Worker | None = None
        self._started = itertools.count(1)

    def expect(self, needs: Needs) -> None:
        """Nothing to start ahead: the worker starts with its first case, whose needs it takes."""

    def run(self, job: Job, case_dir: Path, request: dict[str, Any]) -> RawExit:
        message = {"case_dir": str(case_dir), "request": request}
        worker = self._ensure(job.needs)
        if not worker.helper.send(message):
            self._discard(None)
            worker = self._ensure(job.needs)
            worker.helper.send(message)
        deadline = time.monotonic() + job.timeout
        sink = StderrSink(case_dir / CaseFiles.STDERR)
        try:
            responses = worker.helper.responses.fd
            how = worker.watch.wait(sink, deadline, (responses, self._cancel.fd))
            if how == responses and worker.helper.receive(deadline) is not None:
                worker.watch.drain(sink)
                worker.cases += 1
                return RawExit(0, stderr_bytes=sink.total, worker_case=worker.cases)
            code = self._discard(sink)
            return RawExit(code, how == TIMEOUT, sink.total,
                           worker_case=worker.cases + 1)
        except BaseException:
            if self._worker is not None:
                self._discard(sink)
            raise
        finally:
            sink.close()

    def close(self, *, kill: bool = False) -> None:
        """Kill the worker, if one runs (between cases it has nothing to finish)."""
        if self._worker is not None:
            self._discard(None)

    def _ensure(self, needs: Needs) -> _Worker:
        if self._worker is None:
            log = self._workspace.root / f"worker-{next(self._started)}.log"
            self._worker = _Worker(needs, log, self._workspace.helper_tmp(), self._cancel,
                                   self._memory_mb)
        return self._worker

    def _discard(self, sink: StderrSink | None) -> int:
        """Kill and reap the worker (its last stderr goes to ``sink``, if any)."""
        worker, self._worker = self._worker, None
        assert worker is not None
        return worker.kill(sink)

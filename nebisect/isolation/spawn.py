"""Spawn mode (macOS default): a fresh interpreter per case.

Slower than fork (interpreter start-up plus numpy per case) but safe where forking
after Core ML / Objective-C initialisation crashes the child (coremltools #963, #1819).
The wait also wakes on the isolator's cancel token (the case is then killed as for a
timeout), and what the case left behind outside its process group is reaped after it
(Linux; see :mod:`~nebisect.isolation.reaper`).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from nebisect.isolation import reaper
from nebisect.isolation.cancel import CancelToken
from nebisect.isolation.collect import RawExit
from nebisect.isolation.job import CaseFiles, Job
from nebisect.isolation.needs import Needs
from nebisect.isolation.osproc import helper_command, helper_env
from nebisect.isolation.watch import TIMEOUT, StderrSink, Watch


class SpawnBackend:
    mode = "spawn"

    def __init__(self, cancel: CancelToken) -> None:
        self._cancel = cancel

    def expect(self, needs: Needs) -> None:
        """Nothing to start ahead: a fresh interpreter per case: nothing runs ahead of it."""

    def run(self, job: Job, case_dir: Path, request: dict[str, Any]) -> RawExit:
        (case_dir / CaseFiles.REQUEST).write_text(json.dumps(request))
        started = time.time()
        read_end, write_end = os.pipe()
        try:
            with reaper.started() as register:
                process = subprocess.Popen(
                    helper_command("nebisect.isolation.child", str(case_dir)),
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=write_end,
                    start_new_session=True, close_fds=True,
                    env=reaper.marked_env(helper_env()),
                )
                register(process.pid)
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)
        watch = Watch(process.pid, read_end, process.wait)
        sink = StderrSink(case_dir / CaseFiles.STDERR)
        try:
            how = watch.wait(sink, time.monotonic() + job.timeout, (self._cancel.fd,))
        finally:
            code = watch.finish(sink)
            sink.close()
            reaper.finished(process.pid)
            reaper.reap_adopted()
        return RawExit(code, how == TIMEOUT, sink.total, pid=process.pid, started=started)

    def close(self, *, kill: bool = False) -> None:
        """Nothing outlives a case in spawn mode."""

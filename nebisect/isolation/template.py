"""The fork-mode template: a small long-lived process that forks one child per case.

Started fresh (``python -m nebisect.isolation.template CONFIG``), it imports numpy,
nebisect's core and the job's ``preload`` modules once (and each job's own module on
first use), then forks: a numpy-only fork costs about a millisecond, where a fresh
interpreter that imports coremltools costs seconds. It supervises each child itself —
pidfd + poll for the timeout, the stderr pipe drained into a bounded capture, the
process group killed and the child reaped — and reports the exit code to the parent.
Closing its request pipe (the parent's Ctrl-C path) kills the running case and ends
the template.

Protocol (JSON lines): parent → ``{"case_dir", "request"}``; template → ``{"ready"}``
once, then per case ``{"exit_code", "timed_out", "aborted", "stderr_bytes"}``.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from nebisect.isolation.child import forked_child
from nebisect.isolation.job import CaseFiles
from nebisect.isolation.osproc import reap
from nebisect.isolation.server import preload, send, start_helper
from nebisect.isolation.watch import LineReader, StderrSink, Watch

_REQUESTS, _RESPONSES = 0, 1


def run_case(case_dir: Path, request: dict[str, Any]) -> dict[str, Any]:
    """Fork one child for the case and supervise it to the end."""
    request = {**request, "parent": os.getpid()}
    # The job's own module is imported here once, not in every child: for
    # nebisect.runner that import alone costs tens of milliseconds.
    sys.path[:] = request["sys_path"]
    preload([request["job"]["function"].partition(":")[0]])
    # Everything alive now belongs to the template: keep the child's garbage collector
    # from walking it (a full collection in a child touches, so copies, every page).
    gc.freeze()
    read_end, write_end = os.pipe()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        forked_child(request, case_dir, write_end)
    os.close(write_end)
    watch = Watch(pid, read_end, reaper=lambda: reap(pid))
    sink = StderrSink(case_dir / CaseFiles.STDERR)
    how = watch.wait(sink, time.monotonic() + float(request["job"]["timeout"]), _REQUESTS)
    code = watch.finish(sink)
    sink.close()
    return {
        "exit_code": code,
        "timed_out": how == "timeout",
        "aborted": how == "wake",
        "stderr_bytes": sink.total,
    }


def main() -> None:
    start_helper()
    requests = LineReader(_REQUESTS)
    send(_RESPONSES, {"ready": os.getpid()})
    while line := requests.readline():
        message = json.loads(line)
        report = run_case(Path(message["case_dir"]), message["request"])
        send(_RESPONSES, report)
        if report["aborted"]:
            return


if __name__ == "__main__":
    main()

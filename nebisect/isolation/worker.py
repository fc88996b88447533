"""The persistent worker: one process runs many cases (fuzzing throughput).

Started fresh (``python -m nebisect.isolation.worker CONFIG``). Each case runs in this
process with the same child code as fork and spawn mode (stage file, memory limit,
faulthandler, atomic result); what is lost is the fresh address space, which is why
the parent re-confirms every failure the worker reports in a fresh process. A crash
or ``sys.exit`` in a case ends the worker; the parent diagnoses it from the exit status
and starts another.

The worker is a child subreaper (Linux) and kills every descendant a case left behind
before it reports the case done; if the worker itself dies, its strays go to the
parent, which reaps them (:mod:`~nebisect.isolation.reaper`).

Protocol (JSON lines on private copies of fds 0 and 1; the real fds 0 and 1 point to
/dev/null so nothing a case prints can reach the channel): parent → ``{"case_dir",
"request"}``; worker → ``{"ready"}`` once, then ``{"done"}`` per case.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from nebisect.isolation.child import arm_faulthandler, leave, run_job
from nebisect.isolation.osproc import release_freed_memory
from nebisect.isolation.reaper import become_subreaper, reap_strays
from nebisect.isolation.server import send, start_helper
from nebisect.isolation.watch import LineReader


def main() -> None:
    start_helper()
    become_subreaper()
    requests = LineReader(os.dup(0))
    responses = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    arm_faulthandler()
    send(responses, {"ready": os.getpid()})
    while line := requests.readline():
        message = json.loads(line)
        code = run_job(message["request"], Path(message["case_dir"]))
        reap_strays()
        release_freed_memory()
        if code is not None:
            leave(code)
        send(responses, {"done": True})


if __name__ == "__main__":
    main()

"""Hostile ``forward``s and signals around the API's capture forks: a module object of
the caller's process is exported and traced in forks of it, and those forks are bounded
as every child is — ``memory`` (past it: ``oom``), the convert timeout, what ``forward``
starts (in its process group or not) killed with them — and Ctrl-C or SIGTERM during a
capture is nebisect's ``Stopped``, with nothing left running or in ``$TMPDIR``.

A script calling ``nebisect.run`` runs through :class:`leftovers.Sandbox` (private
``$TMPDIR``, a process token every descendant inherits), as a user's script would.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from support import TERMINAL_SIGNALS
from support.leftovers import READY_WAIT, Sandbox

import nebisect

#: ``forward`` starts a grandchild in its process group and one in a session of its own,
#: says so in READY (argv[1]), then hangs.
SPAWNER = f"""{TERMINAL_SIGNALS}
import os, subprocess, sys, time
import torch
import nebisect

READY = sys.argv[1]


class Spawner(torch.nn.Module):
    def forward(self, x):
        for own_session in (False, True):
            subprocess.Popen(["sleep", "600"], start_new_session=own_session)
        with open(READY, "w") as ready:
            ready.write(str(os.getpid()))
        time.sleep(600)
        return x + 1

"""
#: The script reports how ``nebisect.run`` ended (argv[2]: its timeout).
SCRIPT = SPAWNER + """
try:
    result = nebisect.run(Spawner(), example_inputs=(torch.ones(1, 4),), progress=False,
                          target="sim:fp32", explore="none", timeout=sys.argv[2])
except nebisect.Stopped as stop:
    print("stopped:", stop.result.report.interrupted, flush=True)
    sys.exit(3)
print("finished:", sorted({(r.path, str(r.verdict.status)) for r in result.report.rows}))
print("SIGTERM default again:", signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
"""
#: How each other command that takes a module is called on it (argv[3]: a directory it
#: may write to); each captures the module first.
CAPTURING_CALLS = {
    "lint": "nebisect.lint(Spawner(), example_inputs=INPUTS, timeout='convert=300')",
    "bisect": "nebisect.bisect(Spawner(), example_inputs=INPUTS, target='sim:fp32', "
              "out=OUT, case_timeout='convert=300', progress=False)",
    "fix": "nebisect.fix(Spawner(), ['converter-compat'], example_inputs=INPUTS, "
           "output=OUT + '/fixed.mlpackage', timeout='convert=300')",
    "fuzz": "nebisect.fuzz(Spawner(), example_inputs=INPUTS, progress=False, "
            "timeout='convert=300')",
}
#: The script reports the type of the result a stopped command holds, what stopped it
#: and whether the result reads as a success.
CAPTURING = SPAWNER + """
INPUTS, OUT = (torch.ones(1, 4),), sys.argv[3]
try:
    CALL
except nebisect.Stopped as stop:
    print("stopped:", type(stop.result).__name__, stop.result.interrupted,
          stop.result.ok, flush=True)
    sys.exit(3)
print("finished")
"""


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[Sandbox]:
    made = Sandbox(tmp_path / "sandbox")
    yield made
    made.leftovers(settle=0)


class Hoarder(torch.nn.Module):
    """``forward`` holds 1 GiB (numpy: allocated for real under torch.export's fake
    tensors too)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hoard = np.ones(1 << 27)
        return x + float(hoard[-1])


def test_a_forward_over_memory_is_oom_in_both_capture_forks() -> None:
    result = nebisect.run(Hoarder(), example_inputs=(torch.ones(1, 4),), memory="256M",
                          target="sim:fp32", explore="none", progress=False)
    seen = {(r.path, r.verdict.status, r.verdict.signature, r.verdict.process.memory_limit)
            for r in result.report.rows}
    assert seen == {("export", "oom", "oom", "256M"), ("trace", "oom", "oom", "256M")}
    assert all("memory limit 256M" in r.verdict.message for r in result.report.rows)


@pytest.mark.parametrize(("command", "result"), [
    ("lint", "LintReport"), ("bisect", "BisectReport"), ("fix", "FixReport"),
    ("fuzz", "FuzzReport"),
])
def test_every_command_stopped_while_capturing_raises_stopped_with_its_own_result(
        tmp_path: Path, sandbox: Sandbox, command: str, result: str) -> None:
    script, ready, out = tmp_path / "script.py", sandbox.root / "ready", tmp_path / "out"
    script.write_text(CAPTURING.replace("CALL", CAPTURING_CALLS[command]))
    process = subprocess.Popen([sys.executable, str(script), str(ready), "", str(out)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=sandbox.env())
    code, printed, err = sandbox.terminate_when(process, ready, sig=signal.SIGINT)
    assert printed.splitlines() == [f"stopped: {result} interrupted False"], err[-3000:]
    assert code == 3 and "Traceback" not in err, err[-3000:]
    assert not out.exists()
    assert [debris for debris in sandbox.leftovers()
            if not debris.startswith("temp ") or debris.startswith("temp nebisect-")] == []


@pytest.mark.parametrize(("stop", "timeout", "expected"), [
    (signal.SIGTERM, "convert=300", "stopped: interrupted by SIGTERM"),
    (signal.SIGINT, "convert=300", "stopped: interrupted"),
    (None, "convert=3", "finished: [('export', 'timeout'), ('trace', 'timeout')]"),
])
def test_a_capture_stopped_or_timed_out_leaves_no_process_and_no_directory(
        tmp_path: Path, sandbox: Sandbox, stop: signal.Signals | None, timeout: str,
        expected: str) -> None:
    script, ready = tmp_path / "script.py", sandbox.root / "ready"
    script.write_text(SCRIPT)
    process = subprocess.Popen([sys.executable, str(script), str(ready), timeout],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=sandbox.env())
    if stop is None:
        out, err = process.communicate(timeout=READY_WAIT)
        code = process.returncode
    else:
        code, out, err = sandbox.terminate_when(process, ready, sig=stop)
    assert out.splitlines()[0] == expected, err[-3000:]
    assert code == (0 if stop is None else 3), err[-3000:]
    if stop is None:
        assert out.splitlines()[1] == "SIGTERM default again: True"
    assert "Traceback" not in err
    # torch's own caches in $TMPDIR are not nebisect's: its directories and every process
    assert [debris for debris in sandbox.leftovers()
            if not debris.startswith("temp ") or debris.startswith("temp nebisect-")] == []

"""Run the ``nebisect`` command as a hostile user would, then look for what it left behind.

Each run gets a private ``$TMPDIR`` (so nebisect's workspaces, coremltools' own
``tmp*.mlpackage`` temp packages and anything else written "to temp" land where the
test can see them, and never in a directory another test shares) and an environment
token that every descendant inherits, so a process that outlives the command is found
in ``/proc`` by that token even after it re-parented itself or called ``setsid()``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from support import TERMINAL_SIGNALS

TOKEN_VAR = "NEBISECT_HOSTILE_TEST_TOKEN"
NEBISECT = [sys.executable, "-m", "nebisect"]


def processes_with_token(token: str) -> list[int]:
    """Live (non-zombie) processes whose environment carries ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if token.encode() in environ and state != "Z":
            found.append(int(entry.name))
    return found


@dataclass
class Sandbox:
    """A private temp directory and token for one or more nebisect invocations."""

    root: Path
    token: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def tmpdir(self) -> Path:
        path = self.root / "tmp"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ, TMPDIR=str(self.tmpdir), **extra)
        env[TOKEN_VAR] = self.token
        env.pop("NEBISECT_CLUSTER", None)
        return env

    def run(self, *args: str, timeout: float = 300, cwd: Path | None = None,
            **extra_env: str) -> subprocess.CompletedProcess[str]:
        """``nebisect ARGS`` to completion; stdout and stderr captured as text."""
        return subprocess.run([*NEBISECT, *args], capture_output=True, text=True,
                              timeout=timeout, env=self.env(**extra_env), cwd=cwd)

    def start(self, *args: str, cwd: Path | None = None,
              **extra_env: str) -> subprocess.Popen[str]:
        """``nebisect ARGS`` in the background, for a test that signals it mid-work
        (with the signals of a terminal session, see :data:`support.TERMINAL_SIGNALS`)."""
        command = [sys.executable, "-c", f"{TERMINAL_SIGNALS}; import runpy; "
                   "runpy.run_module('nebisect', run_name='__main__', alter_sys=True)"]
        return subprocess.Popen([*command, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.env(**extra_env),
                                cwd=cwd)

    def terminate_when(self, process: subprocess.Popen[str], ready: Path, *,
                       sig: int = signal.SIGTERM, wait: float = 120) -> tuple[int, str, str]:
        """Send ``sig`` once ``ready`` exists (the work has visibly started); return
        (exit code, stdout, stderr). The process is killed if it ignores the signal."""
        deadline = time.monotonic() + wait
        while not ready.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        process.send_signal(sig)
        try:
            out, err = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        return process.returncode, out, err

    def leftovers(self, settle: float = 5.0) -> list[str]:
        """Everything the runs left: processes with the token, files in the private
        ``$TMPDIR`` (nebisect workspaces, coremltools temp packages). Empty is clean."""
        deadline = time.monotonic() + settle
        while (pids := processes_with_token(self.token)) and time.monotonic() < deadline:
            time.sleep(0.05)
        debris = [f"process {pid}" for pid in pids]
        if self.tmpdir.exists():
            debris += [f"temp {path.name}" for path in sorted(self.tmpdir.iterdir())]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return debris

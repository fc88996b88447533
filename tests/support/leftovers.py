"""Run the ``nebisect`` command as a hostile user would, then look for what it left behind.

Each run gets a private ``$TMPDIR`` (so nebisect's workspaces, coremltools' own
``tmp*.mlpackage`` temp packages and anything else written "to temp" land where the
test can see them, and never in a directory another test shares) and an environment
token that every descendant inherits, so a process that outlives the command is found
in ``/proc`` by that token even after it re-parented itself or called ``setsid()``.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import resource
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from support import TERMINAL_SIGNALS

TOKEN_VAR = "NEBISECT_HOSTILE_TEST_TOKEN"
NEBISECT = [sys.executable, "-m", "nebisect"]
#: How long a test waits for the work to visibly start before it signals: generous, for
#: a busy CI machine (a torch template alone took 30 s to start on a loaded 2-core VM).
READY_WAIT = 600.0


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
            address_space: int = 0, **extra_env: str) -> subprocess.CompletedProcess[str]:
        """``nebisect ARGS`` to completion; stdout and stderr captured as text.
        ``address_space``: an RLIMIT_AS (bytes) on the command and all it starts — the
        guard of a test that hands nebisect something that would fill the machine."""

        def guard() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

        return subprocess.run([*NEBISECT, *args], capture_output=True, text=True,
                              timeout=timeout, env=self.env(**extra_env), cwd=cwd,
                              preexec_fn=guard if address_space else None)

    def start(self, *args: str, cwd: Path | None = None,
              **extra_env: str) -> subprocess.Popen[str]:
        """``nebisect ARGS`` in the background, for a test that signals it mid-work
        (with the signals of a terminal session, see :data:`support.TERMINAL_SIGNALS`)."""
        command = [sys.executable, "-c", f"{TERMINAL_SIGNALS}; import runpy; "
                   "runpy.run_module('nebisect', run_name='__main__', alter_sys=True)"]
        return subprocess.Popen([*command, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=self.env(**extra_env),
                                cwd=cwd)

    def wait_for(self, process: subprocess.Popen[str], name: str, *,
                 wait: float = READY_WAIT) -> Path:
        """The first path in the sandbox whose name matches the glob ``name``, once one
        exists: a sign that the work reached a point (a case's directory, a warm-up's
        directory). The test fails if ``process`` ends or ``wait`` passes first."""
        return _appeared(process, lambda: self._find(name), name, wait)

    def terminate_when(self, process: subprocess.Popen[str], ready: Path, *,
                       sig: int = signal.SIGTERM, wait: float = READY_WAIT,
                       patience: float = 60) -> tuple[int, str, str]:
        """Send ``sig`` once ``ready`` exists (the work has visibly started); return
        (exit code, stdout, stderr). The test fails if ``process`` ends or ``wait``
        passes before ``ready`` appears. The process is killed (SIGKILL, as CI does after
        its grace period) if it has not exited ``patience`` seconds after the signal."""
        _appeared(process, lambda: ready if ready.exists() else None, ready.name, wait)
        return self.terminate(process, sig=sig, patience=patience)

    def terminate(self, process: subprocess.Popen[str], *, sig: int = signal.SIGTERM,
                  patience: float = 60) -> tuple[int, str, str]:
        """Send ``sig`` now; return (exit code, stdout, stderr), the process killed
        ``patience`` seconds after the signal if it has not exited. For a sign that may
        vanish once seen (a case's directory, removed when the case ends): seen by
        :meth:`wait_for`, it needs no second look."""
        process.send_signal(sig)
        out, err = _stop(process, patience)
        return process.returncode, out, err

    def _find(self, name: str) -> Path | None:
        for folder, dirs, files in os.walk(self.root):  # entries may vanish meanwhile
            found = fnmatch.filter(dirs + files, name)
            if found:
                return Path(folder, found[0])
        return None

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


def _appeared(process: subprocess.Popen[str], find: Callable[[], Path | None], what: str,
              wait: float) -> Path:
    """What ``find`` finds, polled while ``process`` runs; the test fails (and the
    process is killed) if it ends or ``wait`` passes first."""
    deadline = time.monotonic() + wait
    while process.poll() is None and time.monotonic() < deadline:
        found = find()
        if found is not None:
            return found
        time.sleep(0.05)
    out, err = _stop(process)
    raise AssertionError(f"no {what} appeared within {wait:g} s (exit {process.returncode})"
                         f"\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}")


def _stop(process: subprocess.Popen[str], patience: float = 0) -> tuple[str, str]:
    """``process``'s output once it has exited, SIGKILLed after ``patience`` seconds."""
    try:
        return process.communicate(timeout=patience)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.communicate()


def one_error_line(stderr: str) -> str:
    """The last stderr line, which must be the one error line (a progress display may
    precede it, a traceback may not)."""
    assert "Traceback" not in stderr
    line = stderr.strip().splitlines()[-1]
    assert line.startswith("nebisect: error: ")
    return line

"""Output paths are checked before the work starts: one line, exit 2, nothing run."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO
from support.corpus_helpers import shipped_package

PACKAGE = str(shipped_package("log-softmax-fp16-underflow"))
UNWRITABLE = "/proc/no-such-dir"  # /proc takes no new directories, not even from root
MISSING = "(No such file or directory)"


@pytest.mark.parametrize(("args", "message"), [
    (["bisect", "examples/logsumexp_ne.py:model", "-t", "sim:ane", "--out", UNWRITABLE],
     f"--out {UNWRITABLE}: cannot create it {MISSING}"),
    (["fix", "apply", "logsumexp-max-shift", PACKAGE, "-o", f"{UNWRITABLE}/m.mlpackage"],
     f"--output {UNWRITABLE}: cannot create it {MISSING}"),
    (["lint", PACKAGE, "-o", f"{UNWRITABLE}/lint.txt"],
     f"--output {UNWRITABLE}: cannot create it {MISSING}"),
    (["replay", "corpus", "--junit", f"{UNWRITABLE}/junit.xml"],
     f"--junit {UNWRITABLE}: cannot create it {MISSING}"),
    (["replay", "corpus", "--junit", "corpus"], "--junit corpus: is a directory"),
    (["replay", "corpus", "--junit", "/sys/kernel/notes"],
     "--junit /sys/kernel/notes: cannot write it (Permission denied)"),
    (["lint", PACKAGE, "-o", "/sys/kernel/notes"],
     "--output /sys/kernel/notes: cannot write it (Permission denied)"),
    (["run", "examples/meanpool.py:model", "--report", UNWRITABLE],
     f"--report {UNWRITABLE}: cannot create it {MISSING}"),
])
def test_unwritable_outputs_fail_at_once(args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "nebisect", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"nebisect: error: {message}"]


def test_an_output_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    """Outputs are renamed into place: over a FIFO (or /dev/null — never test with it: code
    without this check replaces the system's /dev/null) the rename would replace it."""
    fifo = tmp_path / "junit.xml"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "nebisect", "replay", "corpus", "--junit",
                           str(fifo)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"nebisect: error: --junit {fifo}: not a regular file"]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)

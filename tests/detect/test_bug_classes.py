"""Placement off the Neural Engine is a note in ``run``, a failure with ``--require ne``
(issue #23)."""

from __future__ import annotations

import subprocess
import sys

from support import REPO, SUPPORT

NEBISECT = [sys.executable, "-m", "nebisect"]
ADD_ONE = f"{SUPPORT / 'integer_models.py'}:add_one"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NEBISECT, "run", ADD_ONE, "-t", "sim:ane", "--explore", "none",
                           "--lengths", "2", "--convert", "export", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=600)


def test_placement_off_the_neural_engine_is_a_note_unless_required() -> None:
    noted = _run()
    assert noted.returncode == 0, noted.stdout + noted.stderr
    assert ("placement on sim:ane: 0/1 compute ops on ne; elsewhere: add ×1 (integer dtype) "
            "— a note, not a failure (run --require ne fails closed)") in noted.stdout
    required = _run("--require", "ne")
    assert required.returncode == 1, required.stdout + required.stderr
    assert "unrouted" in required.stdout
    wrong = _run("--require", "npu")
    assert wrong.returncode == 2 and "--require 'npu': one of ne, gpu" in wrong.stderr

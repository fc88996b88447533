"""``run --steps`` on a torch source whose ``forward`` updates a buffer in place: the
buffer converted as a state, the fp64 reference carrying it, the failure pinned to the
step where the fp16 state overflows — as tests/detect/test_steps.py pins the package's
(issue 43, item 5)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import REPO, SUPPORT
from support.state_models import SHAPE

NEBISECT = [sys.executable, "-m", "nebisect"]
RUNNING_SUM = f"{SUPPORT / 'state_models.py'}:running_sum"
SCALED = f"{SUPPORT / 'state_models.py'}:scaled"
INCREMENT = 2048.0
#: 65504 / 2048 ≈ 31.98: the fp16 sum of step 32 (65536) is past fp16's largest finite
PREDICTED = math.ceil(65504 / INCREMENT)
NOTE = "buffers updated in place converted as states: acc"


@pytest.fixture(scope="module")
def increments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("inputs") / "x.npz"
    np.savez(path, x=np.full(SHAPE, INCREMENT, np.float32))
    return path


def _run(source: str, inputs: Path, *args: str) -> tuple[int, str]:
    done = subprocess.run([*NEBISECT, "run", source, "--inputs", str(inputs), "-t", "sim:fp16",
                           "--explore", "none", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return done.returncode, done.stdout


def _rows(report: dict, target: str) -> list[dict]:
    return [row for row in report["rows"] if row["target"] == target]


def test_a_torch_running_sum_fails_at_the_step_its_fp16_state_overflows(
        increments: Path) -> None:
    """… as the module's own buffer does in torch's fp16, stepped alike: the finding is
    a note (nebisect.detect.same_precision), its title pinned to the step all the same."""
    code, stdout = _run(RUNNING_SUM, increments, "--steps", "64", "--json")
    report = json.loads(stdout)
    assert PREDICTED == 32
    assert code == 0 and report["findings"] == []
    assert (report["states"], report["steps"]) == (["acc"], 64)
    for conversion in report["conversions"].values():
        assert {a["note"] for a in conversion["metrics"]["attempts"]} == {NOTE}
        assert {"read_state", "coreml_update_state"} <= set(conversion["metrics"]["op_types"])
    rows = _rows(report, "sim:fp16")
    assert [row["path"] for row in rows] == ["export", "trace"]
    for row in rows:
        verdict = row["verdict"]
        assert (verdict["signature"], verdict["metrics"]["steps"]) == (
            "mismatch:nonfinite", PREDICTED)
        # the state is fp16 in the package, float64 in torch's buffer
        assert verdict["message"].startswith(
            f"at step {PREDICTED}: nonfinite at 4/4 elements, e.g. state:acc[0, 0]: "
            "output inf vs reference 65536")
    # the fp64 simulator holds the state in float64, as torch's float64 buffer: every step
    # agrees, which it could not if the reference started each step from zeros
    assert [(row["verdict"]["status"], row["verdict"]["metrics"]["steps"])
            for row in _rows(report, "sim:fp64")] == [("pass", 64)] * 2
    titles = [finding["title"] for finding in report["shared_with_torch"]]
    assert titles == [
        f"precision: add returns inf/NaN in fp16 from |input| ≈ 2.05e+03 at step {PREDICTED} "
        "(sim:fp16; both paths)"]
    assert {(peer["torch"], peer["peer"]["name"], peer["peer"]["kind"])
            for peer in report["torch_peers"]} == {("torch:cpu:fp16", "state:acc",
                                                    "nonfinite")}
    assert [g["step"] for g in report["groups"]] == [PREDICTED] * 2


def test_four_steps_of_the_torch_running_sum_stay_in_fp16_range(increments: Path) -> None:
    code, stdout = _run(RUNNING_SUM, increments, "--steps", "4")
    assert code == 0, stdout
    terminal = " ".join(stdout.split())  # its wrapping undone
    assert ("stateful: buffers updated in place by forward, converted as ct.StateType "
            "states: acc; each input set judged over 4 successive predictions, the states "
            "carried (--steps)") in terminal
    assert "all targets agree with the reference" in terminal


def test_a_torch_source_whose_buffers_are_only_read_runs_as_before(increments: Path) -> None:
    code, stdout = _run(SCALED, increments, "--steps", "64", "--json")
    report = json.loads(stdout)
    assert code == 0
    assert "states" not in report and "steps" not in report
    for conversion in report["conversions"].values():
        assert {a["note"] for a in conversion["metrics"]["attempts"]} == {""}
        assert "read_state" not in conversion["metrics"]["op_types"]
    # predicted once, as before: no step in any verdict
    assert [(row["verdict"]["status"], "steps" in row["verdict"]["metrics"])
            for row in report["rows"]] == [("pass", False)] * 4

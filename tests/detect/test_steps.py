"""``run --steps``: a stateful package judged over a decode loop, its failure pinned to
the step where its fp16 state overflows (issue 43, item 5)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from support.state_programs import SHAPE, save_running_sum

import nebisect
from nebisect.errors import NebisectError

INCREMENT = 2048.0
#: 65504 / 2048 ≈ 31.98: the fp16 sum of step 32 (65536) is past fp16's largest finite
PREDICTED = math.ceil(65504 / INCREMENT)
TARGETS = ["sim:fp32", "sim:fp16", "sim:ane"]


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_running_sum(tmp_path_factory.mktemp("state"), scale=1.0)


@pytest.fixture(scope="module")
def increments(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("inputs") / "x.npz"
    np.savez(path, x=np.full(SHAPE, INCREMENT, np.float16))
    return path


def _run(package: Path, inputs: Path, **options: object) -> dict:
    result = nebisect.run(str(package), inputs=str(inputs), explore="none", target=TARGETS,
                          jobs=1, progress=False, **options)
    return json.loads(result.to_json())


def test_an_fp16_running_sum_fails_at_the_step_65504_over_its_increment_predicts(
        package: Path, increments: Path) -> None:
    report = _run(package, increments, steps=64)
    assert PREDICTED == 32
    for row in report["rows"]:
        verdict = row["verdict"]
        assert (row["target"], verdict["signature"], verdict["metrics"]["steps"]) == (
            row["target"], "mismatch:nonfinite", PREDICTED)
        # the output is the state itself: beyond fp16 range, only the held state fails
        assert verdict["message"].startswith(
            f"at step {PREDICTED}: nonfinite at 4/4 elements, e.g. state:acc[0, 0]: "
            "output inf vs reference 65536")
    # one root cause: the add that makes the fp16 state's inf (sim:fp32 stores the state
    # in fp16 too)
    titles = [finding["title"] for finding in report["findings"]]
    assert titles == [
        f"precision: add returns inf/NaN in fp16, fp32 from |input| ≈ 2.05e+03 at step "
        f"{PREDICTED} (sim:fp16, sim:ane, sim:fp32)"]
    assert [g["step"] for g in report["groups"]] == [PREDICTED] * 3


def test_without_steps_a_stateful_package_is_judged_over_four(
        package: Path, increments: Path) -> None:
    report = _run(package, increments)
    assert [(r["verdict"]["status"], r["verdict"]["metrics"]["steps"])
            for r in report["rows"]] == [("pass", 4)] * 3


def test_a_step_count_that_is_not_a_positive_whole_number_is_one_line(
        package: Path, increments: Path) -> None:
    with pytest.raises(NebisectError, match=r"^--steps 0: give at least 1$"):
        _run(package, increments, steps=0)
    with pytest.raises(NebisectError, match=r"^--steps 'x': give a whole number"):
        _run(package, increments, steps="x")

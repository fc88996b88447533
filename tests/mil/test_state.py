"""Stateful programs (``ct.StateType``): states held at each precision, zeroed at first,
carried from one prediction to the next; states are not inputs a caller gives."""

from __future__ import annotations

import math

import numpy as np
import pytest
from support.state_programs import SHAPE, save_running_sum

from nebisect.mil.interp import compile_program
from nebisect.mil.load import load_program, read_spec
from nebisect.mil.validate import InputError

INCREMENT = 2048.0
#: the first step whose fp16 sum passes 65504 + half an fp16 step there (→ inf)
OVERFLOW_STEP = math.ceil((65504 + 16) / INCREMENT)


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    return load_program(save_running_sum(tmp_path_factory.mktemp("state")))


def _steps(program, precision, profile=None, steps=40, start=None):
    compiled = compile_program(program, precision, profile=profile)
    x = np.full(SHAPE, INCREMENT, np.float16)
    state, seen = start, []
    for _ in range(steps):
        result = compiled.run({"x": x}, state=state)
        state = result.state
        seen.append((result.outputs["out"], state["acc"]))
    return seen


def test_the_package_keeps_its_state_out_of_the_inputs(program, tmp_path):
    path = save_running_sum(tmp_path)
    assert [s.name for s in compile_program(program).specs] == ["x"]
    assert [s.name for s in read_spec(path).description.state] == ["acc"]
    # serialized as write_state + read_state, loaded back as one coreml_update_state
    assert b"write_state" in (path / "Data/com.apple.CoreML/model.mlmodel").read_bytes()
    ops = [op.op_type for op in program.functions["main"].operations if op.op_type != "const"]
    assert ops == ["read_state", "add", "coreml_update_state", "mul"]
    with pytest.raises(InputError, match=r"unknown input.*acc"):
        compile_program(program).run({"x": np.ones(SHAPE, np.float16),
                                      "acc": np.ones(SHAPE, np.float16)})


@pytest.mark.parametrize(("precision", "profile"), [("fp16", None), ("fp32", None),
                                                     ("fp16", "ane")])
def test_an_fp16_running_sum_overflows_at_the_step_65504_over_the_increment_predicts(
        program, precision, profile):
    seen = _steps(program, precision, profile)
    first_inf = next(step for step, (out, _) in enumerate(seen, 1) if np.isinf(out).any())
    assert first_inf == OVERFLOW_STEP == 32
    state = seen[OVERFLOW_STEP - 2][1]
    assert state.dtype == np.float16 and float(state[0, 0]) == INCREMENT * (OVERFLOW_STEP - 1)
    assert np.isinf(seen[OVERFLOW_STEP - 1][1]).all()


def test_the_reference_carries_its_state_in_float64(program):
    seen = _steps(program, "fp64")
    out, state = seen[-1]
    assert state.dtype == np.float64 and float(state[0, 0]) == 40 * INCREMENT
    assert float(out[0, 0]) == 40 * INCREMENT / 1024


def test_a_prediction_starts_from_the_state_it_is_given_else_zeros(program):
    first = _steps(program, "fp16", steps=1)[0][1]
    assert float(first[0, 0]) == INCREMENT
    nearly_full = {"acc": np.full(SHAPE, 64000, np.float16)}
    assert np.isinf(_steps(program, "fp16", steps=1, start=nearly_full)[0][0]).all()

"""Placement as information (issue #23): the simulator's Neural Engine profile says why an
op falls back to the CPU, and a case that notes placement keeps its verdict where one that
requires the device is ``unrouted``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from nebisect.case import Case, CaseOptions, SourceRef
from nebisect.evaluate.judge import _routed
from nebisect.targets.base import Prediction
from nebisect.targets.registry import get_target
from nebisect.verdict import Verdict


def _integer_program() -> Any:
    """``(x + 1) * 2`` on an int32 input: nothing for the Neural Engine."""
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import types

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 4), dtype=types.int32)])
    def program(x: Any) -> Any:
        return mb.mul(x=mb.add(x=x, y=np.int32(1), name="plus"), y=np.int32(2), name="times")

    return program


@pytest.fixture(scope="module")
def integer_prediction() -> Prediction:
    return get_target("sim:ane").predict(_integer_program(), {"x": np.ones((1, 4), np.int32)})


def test_the_ane_profile_says_why_each_op_runs_on_the_cpu(
        integer_prediction: Prediction) -> None:
    assert set(integer_prediction.placement.values()) == {"cpu"}
    assert set(integer_prediction.fallbacks.values()) == {"integer dtype"}


@pytest.mark.parametrize(("options", "status"), [
    (CaseOptions(note_placement=True), "pass"),
    (CaseOptions(), "unrouted"),
    (CaseOptions(note_placement=True, op_of_interest="add"), "unrouted"),
])
def test_placement_off_the_device_is_a_note_only_where_the_case_notes_it(
        integer_prediction: Prediction, options: CaseOptions, status: str) -> None:
    case = Case(SourceRef("mlpackage", "m.mlpackage"), "sim:ane", options=options)
    verdict = _routed(case, integer_prediction, Verdict("pass"))
    assert verdict.status == status
    assert verdict.target_facts.off_device == {"add (integer dtype)": 1, "mul (integer dtype)": 1}
    noted = verdict.target_facts.placement_note or None
    assert noted == ("every compute op (2) ran elsewhere than ne" if status == "pass" else None)


def test_a_note_is_left_out_of_the_case_json_when_off() -> None:
    """Corpus case ids hash the options' JSON: the default adds nothing to it."""
    assert CaseOptions().to_dict() == {}
    assert CaseOptions.from_dict({"note_placement": True}).note_placement

"""Where a cliff enters: the op whose own value shows the failure's symptom."""

from __future__ import annotations

import numpy as np

from nebisect.detect.culprit import by_intermediates
from nebisect.evaluate.programs import ProgramOutline
from nebisect.search.divergence import Dag

#: GroupNorm's variance after a conv, scaled back into fp16's range:
#: x → conv → sub(mean) → square → reduce_mean → mul
OUTLINE = ProgramOutline(
    Dag(["conv_0", "sub_0", "square_0", "reduce_mean_0", "mul_0"],
        {"conv_0": ["x"], "sub_0": ["conv"], "square_0": ["centred"], "reduce_mean_0": ["sq"],
         "mul_0": ["var"]},
        {"conv_0": ["conv"], "sub_0": ["centred"], "square_0": ["sq"],
         "reduce_mean_0": ["var"], "mul_0": ["out"]}, ["x"], ["out"]),
    {"conv_0": "conv", "sub_0": "sub", "square_0": "square", "reduce_mean_0": "reduce_mean",
     "mul_0": "mul"})

#: the exact values: the square and the mean lie beyond fp16's range, the output in it
REFERENCE = {"conv": np.array([300.0, -300.0]), "centred": np.array([300.0, -300.0]),
             "sq": np.array([9e4, 9e4]), "var": np.array([9e4]), "out": np.array([0.9])}
#: fp16 at a waveform of std 192: the conv already 10 % off (past tolerance), the square
#: past 65504
TARGET = {"conv": np.array([330.0, -330.0]), "centred": np.array([330.0, -330.0]),
          "sq": np.array([np.inf, np.inf]), "var": np.array([np.inf]), "out": np.array([np.inf])}


def test_an_overflow_is_blamed_on_the_op_that_overflows() -> None:
    culprit = by_intermediates(OUTLINE, TARGET, REFERENCE, "fp16", "mismatch:nonfinite")
    assert culprit is not None
    assert (culprit.op, culprit.op_type, culprit.signature) == (
        "square_0", "square", "mismatch:nonfinite")


def test_a_tolerance_miss_is_blamed_on_the_first_op_past_tolerance() -> None:
    culprit = by_intermediates(OUTLINE, TARGET, REFERENCE, "fp16", "mismatch:tolerance")
    assert culprit is not None and (culprit.op_type, culprit.signature) == (
        "conv", "mismatch:tolerance")


def test_an_inf_the_reference_shares_is_no_overflow() -> None:
    """A package's own -inf (its reference computes it too) is not where fp16 overflows:
    the search falls back to the first value past tolerance."""
    own = {**REFERENCE, "sq": np.array([np.inf, 9e4])}
    culprit = by_intermediates(OUTLINE, {**TARGET, "sq": np.array([np.inf, 9e4])}, own, "fp16",
                               "mismatch:nonfinite")
    assert culprit is not None and culprit.op_type == "conv"

"""Cliff localization: the fp16 ordinal grid and bracket-and-bisect, pure and on the simulator."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nebisect.errors import NebisectError
from nebisect.search.cliff import GRIDS, Boundary, Cliff, localize

FP16 = GRIDS["fp16"]


def adjacent(lo: float, hi: float) -> bool:
    return float(np.nextafter(np.float16(lo), np.float16(np.inf))) == hi


@pytest.mark.parametrize("x", [0.0, 1.0, -1.0, 7.625, -15.0, 64992.0, 2.0**-24, -(2.0**-14)])
def test_ordinal_round_trips_and_is_monotone(x: float) -> None:
    k = FP16.ordinal(x)
    assert FP16.value(k) == x
    assert FP16.value(k + 1) == float(np.nextafter(np.float16(x), np.float16(np.inf)))
    assert FP16.value(k - 1) == float(np.nextafter(np.float16(x), np.float16(-np.inf)))


def test_ordinal_counts_the_fp16_values_in_a_range() -> None:
    # 19 328 positive fp16 values up to 15, as many negative ones, and zero.
    assert FP16.ordinal(15.0) - FP16.ordinal(-15.0) + 1 == 38657
    assert FP16.ordinal(-0.0) == FP16.ordinal(0.0) == 0
    assert FP16.value(FP16.ordinal(math.inf)) == math.inf
    with pytest.raises(NebisectError):
        FP16.ordinal(math.nan)


def test_bisection_pins_a_threshold_to_adjacent_fp16_values_in_few_predictions() -> None:
    threshold = 7.6241  # fails for x > threshold
    calls: list[float] = []

    def predict(x: float) -> float:
        calls.append(x)
        return x

    cliff = localize(predict, lambda x: x > threshold, -15.0, 15.0,
                     boundaries=[Boundary("log(65504/32)", math.log(65504 / 32)),
                                 Boundary("log(65504)", math.log(65504))])
    assert cliff is not None
    assert cliff.lo < threshold < cliff.hi and adjacent(cliff.lo, cliff.hi)
    assert cliff.ulps == 1 and not cliff.lo_fails
    assert cliff.predictions == len(calls) == len(set(calls)) <= 18
    assert cliff.predicted is not None and cliff.predicted["label"] == "log(65504/32)"
    assert cliff.distance is not None and cliff.distance < 0.01
    assert [p["x"] for p in cliff.probes] == sorted(calls)


def test_a_falling_edge_and_a_known_start_outside_the_range() -> None:
    # passes only above 40: both ends of [-15, 15] fail, the start (50) passes.
    cliff = localize(lambda x: x, lambda x: x < 40.0, -15.0, 15.0, start=50.0)
    assert cliff is not None and cliff.lo_fails
    assert cliff.lo < 40.0 <= cliff.hi and adjacent(cliff.lo, cliff.hi)


def test_coarse_probes_find_a_narrow_failing_window() -> None:
    cliff = localize(lambda x: x, lambda x: 2.0 < x < 6.0, -15.0, 15.0, coarse=8)
    assert cliff is not None and adjacent(cliff.lo, cliff.hi)
    assert (cliff.lo, cliff.hi) in ((2.0, 2.001953125), (5.99609375, 6.0))


def test_no_transition_is_none() -> None:
    assert localize(lambda x: x, lambda x: False, -15.0, 15.0) is None
    with pytest.raises(NebisectError):
        localize(lambda x: x, lambda x: False, grid="fp8")


def test_cliff_json_round_trip() -> None:
    cliff = localize(lambda x: {"output": x}, lambda out: out["output"] > 1.0, -2.0, 2.0,
                     boundaries=[Boundary("one", 1.0, "why")])
    assert cliff is not None
    again = Cliff.from_json(cliff.to_json())
    assert again == cliff and again.distance == cliff.distance


def _sim_cliff(op: str, shape: list[int], params: dict, precision: str, profile: str | None):
    from nebisect.fuzzing.builders import build
    from nebisect.mil.interp import run_program

    program = build(op, "fp16", {"x": shape}, params)

    def predict(x: float) -> tuple[float, float]:
        inputs = {"x": np.full(shape, x, dtype=np.float16)}
        out = run_program(program, inputs, precision, profile=profile).outputs["op_out"]
        ref = run_program(program, inputs, "fp64").outputs["op_out"]
        return float(out.reshape(-1)[0]), float(ref.reshape(-1)[0])

    def failing(pair: tuple[float, float]) -> bool:
        out, ref = pair
        return not abs(out - ref) <= 0.05 * max(1.0, abs(ref))

    return localize(predict, failing, -15.0, 15.0)


def test_simulated_neural_engine_logsumexp_cliff_for_32_channels() -> None:
    cliff = _sim_cliff("reduce_log_sum_exp", [1, 32, 8, 8], {"axes": [1], "keep_dims": True},
                       "fp16", "ane")
    assert cliff is not None and adjacent(cliff.lo, cliff.hi)
    assert abs(cliff.midpoint - math.log(65504 / 32)) < 0.01
    assert cliff.predictions <= 20
    assert cliff.hi_output[0] == 0.0 and cliff.lo_output[0] > 11.0


def test_simulated_neural_engine_softplus_cliff() -> None:
    cliff = _sim_cliff("softplus", [4], {}, "fp16", "ane")
    assert cliff is not None
    assert (cliff.lo, cliff.hi) == (10.390625, 10.3984375)


def test_careful_fp16_logsumexp_has_no_cliff() -> None:
    assert _sim_cliff("reduce_log_sum_exp", [1, 32], {"axes": [1], "keep_dims": True},
                      "fp16", None) is None


def test_both_sides_are_read_at_the_element_the_failing_side_breaks_at() -> None:
    from nebisect.search.readout import Element

    # Element 0 never changes; element 2 is the one that fails once x > 3.
    def predict(x: float) -> list[float]:
        return [1.0, x, 0.0 if x > 3 else x]

    cliff = localize(predict, lambda out: out[2] == 0.0, 1.0, 8.0,
                     describe=lambda out: out[0],
                     element=lambda out: Element("y", (2,)) if out[2] == 0.0 else None,
                     describe_at=lambda out, at: out[at.index[0]])
    assert cliff is not None and cliff.element == {"output": "y", "index": [2]}
    assert (cliff.lo_output, cliff.hi_output) == (3.0, 0.0)
    assert all(p["output"] == (0.0 if p["x"] > 3 else p["x"]) for p in cliff.probes)
    plain = localize(predict, lambda out: out[2] == 0.0, 1.0, 8.0, describe=lambda out: out[0])
    assert plain is not None and plain.element is None
    assert (plain.lo_output, plain.hi_output) == (1.0, 1.0)

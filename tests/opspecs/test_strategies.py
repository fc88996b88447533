"""Value recipes: deterministic materialization, every kind, strict JSON, boundary hints."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings

from nebisect.errors import NebisectError
from nebisect.opspecs import strategies
from nebisect.opspecs.strategies import delta, describe, materialize, nudge, values


def test_delta_replicates_one_fp16_value() -> None:
    array = materialize(delta(7.62109375), [1, 32, 2], "fp16")
    assert array.dtype == np.float16 and array.shape == (1, 32, 2)
    assert np.all(array == np.float16(7.62109375))
    assert np.isnan(materialize(delta("nan"), [3], "fp32")).all()
    assert (materialize(delta("-inf"), [2], "fp16") == -np.inf).all()


def test_uniform_is_seeded_and_prefix_stable() -> None:
    recipe = {"kind": "uniform", "lo": -15.0, "hi": 15.0, "seed": 5}
    a, b = materialize(recipe, [16], "fp16"), materialize(recipe, [16], "fp16")
    assert np.array_equal(a, b) and a.min() >= -15 and a.max() <= 15
    # a smaller shape keeps the first values: shrinking a size keeps the failing element
    assert np.array_equal(materialize(recipe, [6], "fp16"), a[:6])


def test_spike_inject_and_nan_rows() -> None:
    spike = materialize({"kind": "spike", "base": 0.0, "peak": 9.5, "index": 13}, [2, 5], "fp16")
    assert np.count_nonzero(spike) == 1 and spike.reshape(-1)[3] == 9.5
    inject = materialize({"kind": "inject", "lo": -1.0, "hi": 1.0, "seed": 2,
                          "special": "inf", "count": 3}, [10], "fp16")
    assert np.count_nonzero(np.isinf(inject)) == 3
    rows = materialize({"kind": "nan_rows", "lo": -1.0, "hi": 1.0, "seed": 0, "rows": 2},
                       [4, 3], "fp16")
    nan_rows = np.isnan(rows).all(axis=1)
    assert nan_rows.sum() == 2 and not np.isnan(rows[~nan_rows]).any()


def test_bad_recipes_are_one_line_errors() -> None:
    with pytest.raises(NebisectError, match="recipe kind"):
        materialize({"kind": "gauss"}, [2], "fp16")
    with pytest.raises(NebisectError, match="special value"):
        materialize(delta("NaN!"), [2], "fp16")
    with pytest.raises(NebisectError, match="dtype"):
        materialize(delta(1.0), [2], "int8")


def test_nudge_walks_the_fp16_grid() -> None:
    assert nudge(1.0, 1, "fp16") == 1.0009765625
    assert nudge(1.0, -2, "fp16") == 1.0 - 2 * 2.0**-11
    assert nudge(65504.0, 1, "fp16") == math.inf


def test_every_kind_is_drawn_as_strict_json_and_hints_are_used() -> None:
    kinds: set[str] = set()
    deltas: set[float] = set()

    @seed(1)
    @settings(max_examples=300, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(values("fp16", hints=(7.6241,)))
    def check(recipe: dict) -> None:
        json.loads(json.dumps(recipe, allow_nan=False))
        kinds.add(recipe["kind"])
        array = materialize(recipe, [3, 4], "fp16")
        assert array.shape == (3, 4) and array.dtype == np.float16
        if recipe["kind"] == "delta" and isinstance(recipe["value"], float):
            deltas.add(recipe["value"])

    check()
    assert kinds == set(strategies.VALUE_KINDS)
    assert deltas & {nudge(7.6241, k, "fp16") for k in range(-3, 4)}


def test_describe_is_short_and_readable() -> None:
    assert describe(delta(7.625)) == "delta 7.625"
    assert describe({"kind": "inject", "lo": -1.0, "hi": 1.0, "seed": 0,
                     "special": "nan", "count": 2}) == "uniform[-1,1] + 2×nan"

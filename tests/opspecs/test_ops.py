"""Op specs: the registry, dedup classes, predicted boundaries, and programs that build and run."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, seed, settings

from nebisect.errors import NebisectError
from nebisect.fuzzing.builders import HEAD, build, output_names
from nebisect.fuzzing.subject import OpSubject
from nebisect.opspecs.ops import default_class, get_op, registered_ops

REQUIRED = {
    "reduce_log_sum_exp", "reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
    "reduce_prod", "reduce_l1_norm", "reduce_l2_norm", "reduce_log_sum", "reduce_sum_square",
    "reduce_argmax", "reduce_argmin", "softmax", "softplus", "exp", "log", "pow", "sqrt",
    "rsqrt", "erf", "gelu", "sigmoid", "tanh", "silu", "layer_norm", "l2_norm", "matmul",
    "linear", "conv", "cumsum", "topk", "gather", "clip", "real_div",
}


def test_registry_covers_the_required_ops() -> None:
    specs = registered_ops()
    assert len(specs) >= 40
    assert set(specs) >= REQUIRED
    assert all(spec.doc for spec in specs.values())


@pytest.mark.parametrize(("shape", "params", "expected"), [
    ([1, 32, 8, 8], {"axes": [1], "keep_dims": True}, "reduce_log_sum_exp/axes=1/keep_dims"),
    ([1, 32, 8, 8], {"axes": [-3], "keep_dims": False},
     "reduce_log_sum_exp/axes=1/no_keep_dims"),
    ([4, 3], {"axes": None, "keep_dims": True}, "reduce_log_sum_exp/axes=all/keep_dims"),
    ([7], {"axes": [0], "keep_dims": True}, "reduce_log_sum_exp/axes=all/keep_dims"),
])
def test_parameter_classes(shape: list[int], params: dict, expected: str) -> None:
    case = {"inputs": {"x": shape}, "params": params}
    assert get_op("reduce_log_sum_exp").param_class(case) == expected


def test_classes_ignore_floats_seeds_and_sizes() -> None:
    case = {"inputs": {"x": [2, 5]}, "params": {"axis": -1, "alpha": 0.1, "seed": 3}}
    assert default_class("op", case) == "op/axis=last"
    matmul = {"inputs": {"x": [2, 3], "y": [3, 4]},
              "params": {"transpose_x": False, "transpose_y": True, "inner": 3}}
    assert get_op("matmul").param_class(matmul) == "matmul/no_transpose_x/transpose_y"


def test_predicted_boundaries() -> None:
    lse = get_op("reduce_log_sum_exp").boundaries(
        {"inputs": {"x": [1, 32, 8, 8]}, "params": {"axes": [1], "keep_dims": True}})
    assert lse[0].label == "log(65504/32)" and lse[0].value == pytest.approx(7.6241, abs=1e-4)
    softplus = {b.label: b.value for b in get_op("softplus").boundaries({})}
    assert softplus["ln 2^15"] == pytest.approx(10.3972, abs=1e-4)
    assert softplus["log(65504)"] == pytest.approx(11.0899, abs=1e-4)


def _drawn_cases(spec_name: str, count: int) -> list[dict[str, Any]]:
    subject = OpSubject(get_op(spec_name))
    drawn: list[dict[str, Any]] = []

    @seed(7)
    @settings(max_examples=count, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(subject.cases)
    def collect(case: dict[str, Any]) -> None:
        drawn.append(case)

    collect()
    return drawn


@pytest.mark.parametrize("name", sorted(registered_ops()))
def test_drawn_cases_build_run_and_wrap_transparently(name: str) -> None:
    """Every op's cases are strict JSON, build, run on the oracle, and survive the wrap."""
    from nebisect.mil.interp import run_program

    spec = get_op(name)
    names = output_names(spec.outputs)
    for case in _drawn_cases(name, 3):
        json.loads(json.dumps(case, allow_nan=False))
        program = case["program"]
        plain = build(**program)
        wrapped = build(**{**program, "wrap": "ne-attract"})
        inputs = OpSubject(spec).arrays(case)
        direct = run_program(plain, inputs, "fp64").outputs
        through = run_program(wrapped, inputs, "fp64").outputs
        assert sorted(direct) == sorted(names) and set(through) == {*names, HEAD}
        for output in names:
            np.testing.assert_array_equal(direct[output], through[output])


def test_wrap_attracts_with_conv_and_linear_around_the_op() -> None:
    program = build("softplus", "fp16", {"x": [2, 3]}, {}, wrap="ne-attract")
    ops = [op.op_type for op in program.functions["main"].operations if op.op_type != "const"]
    assert ops[ops.index("softplus") - 2] == "conv" and ops[-1] == "linear"
    with pytest.raises(NebisectError, match="unknown wrap"):
        build("softplus", "fp16", {"x": [2]}, {}, wrap="gpu-attract")


def test_log_sum_exp_of_delta_input_is_x_plus_log_c() -> None:
    from nebisect.mil.interp import run_program

    program = build("reduce_log_sum_exp", "fp16", {"x": [1, 32, 2, 2]},
                    {"axes": [1], "keep_dims": True})
    out = run_program(program, {"x": np.full((1, 32, 2, 2), 2.5, np.float16)}, "fp64")
    assert out.outputs["op_out"].shape == (1, 1, 2, 2)
    assert np.allclose(out.outputs["op_out"], 2.5 + math.log(32))

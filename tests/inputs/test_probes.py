"""Guided probes: lint's interval analysis run backwards on real MIL programs (built with
coremltools' MIL builder, no conversion), and fed to the explorer."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import support.lint_programs as lp

from nebisect.inputs.families import InputSet, ModelInputs, build
from nebisect.inputs.probes import Probe, guided_probes
from nebisect.search.explore import explore
from nebisect.search.records import Culprit, Observation
from nebisect.sources.inputs import InputDescription
from nebisect.verdict import Verdict

LSE_CLIFF = math.log(65504 / 32)


def scaled_logsumexp(scale: float) -> Any:
    """``reduce_log_sum_exp(scale · x)`` over 32 channels: the op's input is not x."""

    @lp.mb.program(input_specs=[lp.mb.TensorSpec(shape=(1, 32, 4), dtype=lp.types.fp16)],
                   opset_version=lp.OPSET)
    def prog(x: Any) -> Any:
        scaled = lp.mb.mul(x=x, y=np.float16(scale), name="scale")
        return lp.mb.reduce_log_sum_exp(x=scaled, axes=[1], keep_dims=True, name="lse")

    return prog


def test_seed000_program_predicts_log_65504_over_32() -> None:
    [probe] = guided_probes(lp.seed000())
    assert probe.input == "x" and probe.op_type == "reduce_log_sum_exp" and probe.op_name == "lse"
    assert probe.magnitude == pytest.approx(LSE_CLIFF, abs=1e-9)
    assert round(probe.magnitude, 4) == 7.6241 and probe.attained
    assert probe.theory.label == "log(65504/32)" and probe.direct
    boundary = probe.boundary()
    assert boundary.label == "log(65504/32)" and boundary.value == probe.magnitude
    assert Probe.from_dict(probe.to_dict()) == probe


def test_an_fp32_program_is_probed_as_the_neural_engine_computes_it() -> None:
    assert [p.op_type for p in guided_probes(lp.seed000(dtype="fp32"))] == ["reduce_log_sum_exp"]
    assert guided_probes(lp.seed000(dtype="fp32"), assume_fp16=False) == []


def test_softplus_program_predicts_the_published_neural_engine_cliff() -> None:
    [probe] = guided_probes(lp.softplus())
    assert probe.magnitude == pytest.approx(15 * math.log(2.0), abs=1e-9)
    assert probe.theory.label == "ln 2^15" and probe.op_type == "softplus"


def test_a_cured_program_gives_no_probe_at_the_op() -> None:
    assert all(p.op_type != "reduce_log_sum_exp" for p in guided_probes(lp.seed000(shifted=True)))
    assert guided_probes(lp.softplus(stable=True)) == []


def test_a_scaled_input_moves_the_probe_and_names_the_op_in_its_label() -> None:
    probe, scale = guided_probes(scaled_logsumexp(2.0))  # smallest magnitude first
    assert (scale.op_name, scale.theory.label) == ("scale", "mul reaches 65504")
    assert scale.magnitude == pytest.approx(65504 / 2, rel=1e-3)
    assert probe.magnitude == pytest.approx(LSE_CLIFF / 2, abs=1e-9)
    assert probe.theory.label == "log(65504/32)" and not probe.direct
    assert probe.boundary().label == "log(65504/32) at reduce_log_sum_exp 'lse'"
    assert probe.boundary().value == probe.magnitude


def test_probes_guide_the_explorer_to_a_cliff_beside_the_predicted_boundary() -> None:
    def device(input_set: InputSet) -> Observation:
        if float(np.max(input_set.arrays["x"])) > LSE_CLIFF:
            return Observation(Verdict("mismatch", signature="mismatch:collapse"),
                               Culprit("lse", "reduce_log_sum_exp", "", ""), "export", 0.0)
        return Observation(Verdict("pass"), output=1.0)

    inputs = ModelInputs([InputDescription("x", "float16", [(1, 1), (1, 1), (8, 8), (8, 8)])],
                         example={"x": np.full((1, 1, 8, 8), 2.5, dtype=np.float16)})
    guided = [p.boundary() for p in guided_probes(lp.seed000())]
    result = explore(device, build(inputs), budget=2, guided=guided)
    assert result.spent == 2 and result.guided[0].confirmed
    [cliff] = result.cliffs
    assert (cliff.cliff.lo, cliff.cliff.hi) == (7.62109375, 7.625)
    assert cliff.cliff.predicted is not None
    assert cliff.cliff.predicted["label"] == "log(65504/32)"
    assert cliff.cliff.distance is not None and cliff.cliff.distance < 0.003


def dot_products() -> Any:
    """A conv → linear → matmul chain (every model with nn.Linear or nn.Conv2d has one)."""
    conv_weight = np.ones((4, 3, 2, 2), dtype=np.float16)
    linear_weight = np.full((8, 4), 0.5, dtype=np.float16)

    @lp.mb.program(input_specs=[lp.mb.TensorSpec(shape=(1, 3, 4, 4), dtype=lp.types.fp16)],
                   opset_version=lp.OPSET)
    def prog(x: Any) -> Any:
        conv = lp.mb.conv(x=x, weight=conv_weight, name="conv")
        flat = lp.mb.reshape(x=conv, shape=[9, 4], name="flat")
        dense = lp.mb.linear(x=flat, weight=linear_weight, name="dense")
        return lp.mb.matmul(x=dense, y=dense, transpose_y=True, name="gram")

    return prog


def test_dot_product_ops_get_their_inner_dimension_bound() -> None:
    probes = {p.op_type: p for p in guided_probes(dot_products())}
    assert set(probes) >= {"conv", "linear", "matmul"}
    # conv sums 3·2·2 = 12 terms of x·1: it leaves fp16 at |x| = 65504 / 12
    assert probes["conv"].magnitude == pytest.approx(65504 / 12, rel=1e-9)
    assert probes["conv"].theory.label == "65504/12" and probes["conv"].direct
    # every later op is scaled by the ones before it: bounded, and ordered
    assert probes["linear"].magnitude < probes["conv"].magnitude
    assert probes["matmul"].magnitude < probes["linear"].magnitude

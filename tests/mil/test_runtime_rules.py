"""The Core ML runtime's published rules (issue 26): each rule rebuilt from its report on a
program made with coremltools' MIL builder.

For a rule that refuses: every ``sim:*`` target modelling a unit the rule names fails at
load with the published text, the float64 oracle and ``:spec`` run the program, and
``nebisect lint`` flags the op. For a rule that computes: the runtime's numbers on
``sim:*``, the definition's on ``:spec``, and lint flags the op.
"""

from __future__ import annotations

import numpy as np
import pytest

from nebisect.hazards.engine import lint_program
from nebisect.mil.interp import SimRefusal, compile_program, run_program
from nebisect.mil.semantics.rules import RUNTIME_RULES, runtime_rule, runtime_rules
from nebisect.targets import get_target

ct = pytest.importorskip("coremltools")
from coremltools.converters.mil import Builder as mb  # noqa: E402

OPSET = ct.target.iOS17
#: the sim targets and the unit each models (sim:ane places each op itself)
UNIT_TARGETS = {"sim:fp32": "cpu", "sim:fp16": "gpu", "sim:fp16-naive": "gpu"}


def _rule_findings(program, name):
    return [f for f in lint_program(program).findings
            if f.rule_id == "runtime-rule" and f"rule {name})" in f.message]


# --- avg_pool with ceil_mode: coremltools issue #2772, PR #2844 ------------------------------

def _avg_pool(shape, kernel, stride, *, exclude=False, pad=None):
    spatial = len(shape) - 2

    @mb.program(input_specs=[mb.TensorSpec(shape)], opset_version=OPSET)
    def prog(x):
        return mb.avg_pool(x=x, kernel_sizes=[kernel] * spatial, strides=[stride] * spatial,
                           pad_type="custom", pad=pad or [0] * 2 * spatial, ceil_mode=True,
                           exclude_padding_from_average=exclude, name="out")

    return prog


def test_avg_pool_2d_ceil_mode_divides_the_overhang_by_the_kernel_pr_2844():
    """PR #2844: AvgPool2d(2, stride=3, ceil_mode=True) on arange(49) 7x7 is
    [[4, 7, 9.5], [25, 28, 30.5], [42.5, 45.5, 48]] in torch and
    [[4, 7, 4.75], [25, 28, 15.25], [21.25, 22.75, 12]] on Core ML."""
    prog = _avg_pool((1, 1, 7, 7), 2, 3)
    x = {"x": np.arange(49, dtype=np.float32).reshape(1, 1, 7, 7)}
    for precision in ("fp64", "fp32", "fp16"):
        runtime = run_program(prog, x, precision).outputs["out"][0, 0]
        spec = run_program(prog, x, precision, semantics="spec").outputs["out"][0, 0]
        assert runtime.tolist() == [[4, 7, 4.75], [25, 28, 15.25], [21.25, 22.75, 12]]
        assert spec.tolist() == [[4, 7, 9.5], [25, 28, 30.5], [42.5, 45.5, 48]]
    assert len(_rule_findings(prog, "avg-pool-ceil-overhang")) == 1


def test_avg_pool_1d_ceil_mode_issue_2772():
    """PR #2844: "AvgPool1d is affected the same way: [0.5, 3.5, 6.0] becomes
    [0.5, 3.5, 3.0]" (kernel 2, stride 3 over arange(7))."""
    prog = _avg_pool((1, 1, 7), 2, 3)
    x = {"x": np.arange(7, dtype=np.float32).reshape(1, 1, 7)}
    assert run_program(prog, x, "fp32").outputs["out"].ravel().tolist() == [0.5, 3.5, 3.0]
    assert run_program(prog, x, "fp32", semantics="spec").outputs["out"].ravel().tolist() == [
        0.5, 3.5, 6.0]


def test_avg_pool_ceil_mode_is_the_definition_where_the_rule_does_not_apply():
    """Excluding padding excludes the overhang (PR #2844's fix), and windows that tile the
    input exactly never overhang: both runtimes agree with the definition, lint is quiet."""
    x7 = {"x": np.arange(49, dtype=np.float32).reshape(1, 1, 7, 7)}
    excluded = _avg_pool((1, 1, 7, 7), 2, 3, exclude=True)
    assert run_program(excluded, x7, "fp32").outputs["out"][0, 0, 0].tolist() == [4, 7, 9.5]
    tiling = _avg_pool((1, 1, 8, 8), 2, 2)
    x8 = {"x": np.arange(64, dtype=np.float32).reshape(1, 1, 8, 8)}
    np.testing.assert_array_equal(run_program(tiling, x8, "fp32").outputs["out"],
                                  run_program(tiling, x8, "fp32", semantics="spec").outputs["out"])
    assert _rule_findings(excluded, "avg-pool-ceil-overhang") == []
    assert _rule_findings(tiling, "avg-pool-ceil-overhang") == []


# --- the registry and its one validator ------------------------------------------------------

def test_every_rule_cites_a_public_report_and_is_tested_here():
    """Each registered rule names its report and has a test below that builds its trigger."""
    import inspect
    import sys

    source = inspect.getsource(sys.modules[__name__])
    for rule in runtime_rules():
        assert "#" in rule.source, rule
        assert f'"{rule.name}"' in source, f"rule {rule.name} has no test here"


def test_a_rule_is_data_with_a_known_stage_units_and_source():
    with pytest.raises(ValueError, match="unknown stage"):
        runtime_rule("bad", op_type="pad", trigger="t", stage="compile", units=frozenset({"cpu"}),
                     message="m", source="s", remedy="r")
    with pytest.raises(ValueError, match="units"):
        runtime_rule("bad", op_type="pad", trigger="t", stage="load", units=frozenset({"tpu"}),
                     message="m", source="s", remedy="r")
    with pytest.raises(ValueError, match="cites"):
        runtime_rule("bad", op_type="pad", trigger="t", stage="load", units=frozenset({"cpu"}),
                     message="m", source="", remedy="r")
    assert "bad" not in RUNTIME_RULES.names()


def test_the_oracle_and_spec_never_refuse():
    """compile_program applies refusals only for a named unit or profile and the coreml
    semantics: the float64 oracle (no unit) and ``:spec`` compile any program."""
    prog = _avg_pool((1, 1, 7, 7), 2, 3)
    assert compile_program(prog, "fp64").plan.refusal is None
    assert compile_program(prog, "fp32", unit="cpu", semantics="spec").plan.refusal is None
    assert get_target("sim:fp64").sim_unit is None  # type: ignore[attr-defined]
    assert {name: get_target(name).sim_unit for name in UNIT_TARGETS} == UNIT_TARGETS  # type: ignore[attr-defined]
    assert issubclass(SimRefusal, RuntimeError)

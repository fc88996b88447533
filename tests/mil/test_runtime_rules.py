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
from nebisect.targets.registry import get_target

ct = pytest.importorskip("coremltools")
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import types  # noqa: E402

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


# --- refusals: the sim targets fail at load with the device's text ---------------------------

def _refusal_on_targets(program):
    """sim target → the text its load raises (None: it loads), over every sim target."""
    texts = {}
    for name in ("sim:fp64", "sim:fp32", "sim:fp16", "sim:fp16-naive", "sim:ane",
                 "sim:fp32:spec", "sim:ane:spec"):
        try:
            get_target(name).load(program)
            texts[name] = None
        except SimRefusal as refusal:
            texts[name] = str(refusal)
    return texts


def _assert_refused(program, rule_name, text, op_name="out"):
    """Every unit-modelling target refuses with ``text`` at ``op_name``; the oracle and
    ``:spec`` load; lint flags the op once, as an error."""
    texts = _refusal_on_targets(program)
    refused = {name for name, got in texts.items() if got is not None}
    assert refused == {"sim:fp32", "sim:fp16", "sim:fp16-naive", "sim:ane"}, texts
    first, where = texts["sim:fp32"].split("\n")
    assert first.startswith(text), first
    assert where == f"at {RUNTIME_RULES.get(rule_name).op_type} '{op_name}' on cpu"
    assert len({t.split(chr(10))[0] for t in texts.values() if t}) == 1  # one signature
    (finding,) = _rule_findings(program, rule_name)
    assert (finding.severity, finding.op_name) == ("error", op_name)
    assert finding.details["remedy"] == RUNTIME_RULES.get(rule_name).remedy


def _pad(shape, pad, mode):
    @mb.program(input_specs=[mb.TensorSpec(shape)], opset_version=OPSET)
    def prog(x):
        return mb.pad(x=x, pad=np.array(pad, np.int32), mode=mode, name="out")

    return prog


PAD_REFUSED = ('Error compiling model: "Failed to parse the model specification. Error: '
               "Unable to parse ML Program: in operation <op>: Padding for more than two "
               'dimensions only supports `constant` mode".')


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_outside_the_last_two_dims_is_refused_issue_2576_2571(mode):
    """#2576 / #2571: ReflectionPad3d(2) / ReplicationPad3d(2) on (1, 6, 6, 6, 6) "fails at
    runtime": "in operation pad_cast_fp16: Padding for more than two dimensions only
    supports `constant` mode"."""
    _assert_refused(_pad((1, 6, 6, 6, 6), [2] * 6, mode), "pad-outer-dims-non-constant",
                    PAD_REFUSED)


@pytest.mark.parametrize(("pad", "refused"), [
    ([0, 0, 0, 0, 0, 0, 0, 0, 1, 1], False),   # axis 4
    ([0, 0, 0, 0, 0, 0, 1, 1, 1, 1], False),   # axes 3, 4
    ([0, 0, 0, 0, 1, 1, 0, 0, 0, 0], True),    # axis 2
    ([0, 0, 0, 0, 1, 1, 1, 1, 0, 0], True),    # axes 2, 3
    ([0, 0, 1, 1, 0, 0, 0, 0, 0, 0], True),    # axis 1
])
def test_pad_rule_is_pr_2701s_table(pad, refused):
    """PR #2701 enumerates the runtime against a rank-5 input ("identical for reflect and
    replicate"): only non-zero padding outside the last two axes is rejected."""
    program = _pad((2, 3, 4, 5, 6), pad, "reflect")
    assert (compile_program(program, "fp32", unit="cpu").plan.refusal is not None) is refused
    assert bool(_rule_findings(program, "pad-outer-dims-non-constant")) is refused


def test_pad_rule_counts_padded_axes_not_their_number_pr_2701():
    """PR #2701: 'a rank-4 F.pad(x, (0,0,1,2,2,1), mode="replicate") pads only two axes
    and is still rejected'; constant padding of the same axes loads."""
    pad = [2, 1, 1, 2, 0, 0]  # MIL order: dims -3, -2, -1
    assert compile_program(_pad((1, 3, 8, 8), pad, "replicate"), "fp32",
                           unit="cpu").plan.refusal is not None
    assert compile_program(_pad((1, 3, 8, 8), pad, "constant"), "fp32",
                           unit="cpu").plan.refusal is None


def _linear(dtype):
    np_dtype = np.int32 if dtype is types.int32 else np.float32

    @mb.program(input_specs=[mb.TensorSpec((8, 8), dtype)], opset_version=OPSET)
    def prog(x):
        return mb.linear(x=x, weight=np.arange(64, dtype=np_dtype).reshape(8, 8), name="out")

    return prog


def test_integer_linear_is_refused_when_planned_issue_2575():
    """#2575 (executorch #11691): torch.mm by a constant int32 (8, 8) matrix converts to an
    int32 ``linear`` that fails with "Failed to build the model execution plan using a
    model architecture file '…/model.mil' with error code: -14."; the float one loads,
    and the oracle computes the integer product exactly."""
    program = _linear(types.int32)
    _assert_refused(program, "linear-integer",
                    "Failed to build the model execution plan using a model architecture "
                    "file '<path>/model.mil' with error code: -14.")
    x = np.arange(64, dtype=np.int32).reshape(8, 8)
    exact = run_program(program, {"x": x}, "fp64").outputs["out"]
    np.testing.assert_array_equal(exact, x @ np.arange(64, dtype=np.int64).reshape(8, 8).T)
    assert compile_program(_linear(types.fp32), "fp32", unit="cpu").plan.refusal is None
    assert _rule_findings(_linear(types.fp32), "linear-integer") == []


def test_the_first_refusal_in_program_order_at_the_earliest_stage_is_reported():
    """A program breaking a load rule after a plan rule reports the load rule: Core ML
    parses a program before it plans it."""

    @mb.program(input_specs=[mb.TensorSpec((8, 8), types.int32),
                             mb.TensorSpec((1, 6, 6, 6, 6))], opset_version=OPSET)
    def prog(x, v):
        product = mb.linear(x=x, weight=np.ones((8, 8), np.int32), name="product")
        padded = mb.pad(x=v, pad=np.array([2] * 6, np.int32), mode="reflect", name="padded")
        return product, padded

    refusal = compile_program(prog, "fp32", unit="cpu").plan.refusal
    assert (refusal.rule.name, refusal.op_name) == ("pad-outer-dims-non-constant", "padded")
    with pytest.raises(SimRefusal, match="Padding for more than two dimensions"):
        run_program(prog, {"x": np.ones((8, 8), np.int32),
                           "v": np.ones((1, 6, 6, 6, 6), np.float32)}, "fp32", unit="cpu")


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

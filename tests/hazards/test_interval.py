"""Interval analysis: sound against the simulator, attained where it says so, and the
``fp16-range-overflow`` rule built on it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import support.lint_programs as lp

from nebisect.hazards import Range, lint_program
from nebisect.hazards.graph import ProgramView
from nebisect.hazards.interval import Interval, analyze, even_power
from nebisect.hazards.interval_affine import affine_bounds
from nebisect.mil.interp import run_program


def intervals_by_name(program, ranges) -> dict[str, Interval]:
    view = ProgramView(program, input_ranges=ranges)
    known = analyze(view)
    return {op.outputs[0].name: known[id(op.outputs[0])] for op in view.ops()
            if id(op.outputs[0]) in known}


def uniform_inputs(program, value: float) -> dict[str, np.ndarray]:
    function = program.functions["main"]
    return {name: np.full(var.shape, value) for name, var in function.inputs.items()}


PROGRAMS = {
    "seed000-delta": lambda: lp.seed000(dtype="fp32"),
    "seed000-random": lambda: lp.seed000(dtype="fp32", delta=False),
    "seed000-shifted": lambda: lp.seed000(shifted=True, dtype="fp32"),
    "softplus-stable": lambda: lp.softplus(stable=True, dtype="fp32"),
    "log-softmax-stable": lambda: lp.log_softmax(stable=True, dtype="fp32"),
    "rms": lambda: lp.rms_norm(dtype="fp32"),
    "rms-rescaled": lambda: lp.rms_norm(rescaled=True, dtype="fp32"),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_intervals_contain_every_simulated_value(name):
    program = PROGRAMS[name]()
    lo, hi = -6.0, 6.0
    bounds = intervals_by_name(program, {"x": Range(lo, hi)})
    assert bounds, "the analysis derived nothing"
    rng = np.random.default_rng(1)
    function = program.functions["main"]
    samples = [uniform_inputs(program, lo), uniform_inputs(program, hi)] + [
        {n: rng.uniform(lo, hi, v.shape) for n, v in function.inputs.items()} for _ in range(5)
    ]
    for inputs in samples:
        values = run_program(program, inputs, "fp64", intermediates=True).intermediates
        for var, interval in bounds.items():
            value = values[var]
            assert np.all(value >= interval.lo - 1e-9 * max(1, abs(interval.lo))), var
            assert np.all(value <= interval.hi + 1e-9 * max(1, abs(interval.hi))), var


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_exact_bounds_are_attained_by_a_uniform_input(name):
    program = PROGRAMS[name]()
    lo, hi = -6.0, 6.0
    bounds = intervals_by_name(program, {"x": Range(lo, hi)})
    runs = [run_program(program, uniform_inputs(program, v), "fp64", intermediates=True)
            for v in (lo, hi)]
    checked = 0
    for var, interval in bounds.items():
        for flag, bound in ((interval.hi_exact, interval.hi), (interval.lo_exact, interval.lo)):
            if flag:
                checked += 1
                assert any(np.allclose(r.intermediates[var], bound) for r in runs), var
    assert checked or name == "seed000-random"


def test_seed000_delta_conv_keeps_the_bound_exact_through_the_reduction():
    bounds = intervals_by_name(lp.seed000(), {"x": Range(-15, 15)})
    assert bounds["conv"] == Interval(-15.0, 15.0, True, True)
    lse = bounds["lse"]
    assert (lse.lo, lse.hi) == pytest.approx((-15 + math.log(32), 15 + math.log(32)))
    assert lse.hi_exact and lse.lo_exact


def test_random_conv_bounds_are_not_claimed_exact():
    bounds = intervals_by_name(lp.seed000(delta=False), {"x": Range(-15, 15)})
    assert not bounds["conv"].hi_exact and not bounds["conv"].lo_exact


def test_max_shift_bounds_the_exponent_by_zero():
    bounds = intervals_by_name(lp.seed000(shifted=True), {"x": Range(-15, 15)})
    shifted = next(v for k, v in bounds.items() if k.startswith("sub"))
    assert (shifted.lo, shifted.hi, shifted.hi_exact) == (-30.0, 0.0, True)


def test_helpers():
    assert even_power(Interval(-3, 2, True, True), 2) == Interval(0.0, 9.0, False, True)
    assert even_power(Interval(-3, -1, True, False), 2) == Interval(1.0, 9.0, False, True)
    weights = np.array([[1.0, -2.0], [0.5, 0.5]])
    bounds = affine_bounds(weights, np.array([0.0, 1.0]), Interval(-1, 1, True, True))
    assert (bounds.lo, bounds.hi, bounds.hi_exact) == (-3.0, 3.0, False)
    uniform = affine_bounds(np.ones((3, 4)), np.zeros(3), Interval(0, 2, True, True))
    assert uniform == Interval(0.0, 8.0, True, True)


# -- the rule ------------------------------------------------------------------------------


def test_seed000_overflow_proven_at_the_seed_sweep_range():
    result = lint_program(lp.seed000(), input_ranges={"x": Range(-15, 15)})
    finding = next(f for f in result.findings if f.rule_id == "fp16-range-overflow")
    assert (finding.severity, finding.op_name, finding.details["exact"]) == ("error", "lse", True)
    assert finding.details["bound"] == pytest.approx(32 * math.exp(15))
    assert "x ∈ [-15, 15]" in finding.message


def test_overflow_boundary_is_log_65504_over_c():
    below = lint_program(lp.seed000(), input_ranges={"x": Range(-15, 7.62)})
    above = lint_program(lp.seed000(), input_ranges={"x": Range(-15, 7.63)})
    assert "fp16-range-overflow" not in {f.rule_id for f in below.findings}
    assert "fp16-range-overflow" in {f.rule_id for f in above.findings}


def test_unattained_bound_is_a_warning():
    result = lint_program(lp.seed000(delta=False), input_ranges={"x": Range(-15, 15)})
    (finding,) = [f for f in result.findings if f.rule_id == "fp16-range-overflow"]
    assert finding.severity == "warning" and not finding.details["exact"]


def test_softplus_overflow_uses_the_neural_engine_limit():
    over = lint_program(lp.softplus(), input_ranges={"x": Range(-15, 10.5)})
    under = lint_program(lp.softplus(), input_ranges={"x": Range(-15, 10.3)})
    assert "fp16-range-overflow" in {f.rule_id for f in over.findings}
    assert "fp16-range-overflow" not in {f.rule_id for f in under.findings}


def test_cured_programs_have_no_range_findings():
    for program in (lp.seed000(shifted=True), lp.softplus(stable=True),
                    lp.log_softmax(stable=True), lp.logcumsumexp(shifted=True)):
        assert lint_program(program, input_ranges={"x": Range(-15, 15)}).findings == []


def test_only_the_first_overflow_on_a_path_is_reported():
    result = lint_program(lp.rms_norm(), input_ranges={"x": Range(-300, 300)})
    overflow = [f for f in result.findings if f.rule_id == "fp16-range-overflow"]
    assert [(f.op_name, f.severity) for f in overflow] == [("squares", "error")]
    assert overflow[0].details["bound"] == pytest.approx(90000.0)


def test_no_ranges_no_interval_findings():
    assert {f.rule_id for f in lint_program(lp.seed000()).findings} == {"lse-no-max-shift"}

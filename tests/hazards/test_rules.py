"""Lint rules on small MIL programs: each hazard flagged, each cured form not flagged."""

from __future__ import annotations

import math

import numpy as np
import pytest
import support.lint_programs as lp

from nebisect.errors import NebisectError
from nebisect.hazards import Range, lint_program, parse_input_range, registered_rules
from nebisect.hazards.registry import lint_rule


def rules_of(program, **options) -> list[tuple[str, str, str]]:
    result = lint_program(program, **options)
    return [(f.severity, f.rule_id, f.op_name) for f in result.findings]


# -- registry ------------------------------------------------------------------------------


def test_every_rule_cites_a_public_source():
    rules = registered_rules()
    assert set(rules) == {
        "lse-no-max-shift", "softplus-fp16", "rms-sum-squares-fp16", "log-of-softmax",
        "log-cumsum-exp", "data-dependent-shape", "fp16-inf-mask", "fp16-const-out-of-range",
        "fp16-range-overflow", "fold-runtime", "fold-deviation", "runtime-rule",
    }
    for rule in rules.values():
        assert "#" in rule.source or "seed" in rule.source, rule.id
        assert rule.rationale and rule.title


def test_a_rule_needs_a_known_fix_or_a_remedy():
    with pytest.raises(ValueError, match="unknown fix"):
        lint_rule("new-rule", severity="error", title="t", rationale="r", source="s",
                  fix="no-such-fix")
    with pytest.raises(ValueError, match="needs a remedy"):
        lint_rule("new-rule", severity="error", title="t", rationale="r", source="s")


@pytest.mark.parametrize("text, expected", [
    ("x=-15:15", ("x", Range(-15.0, 15.0))),
    ("tokens=0:1e3", ("tokens", Range(0.0, 1000.0))),
    ("x=.5:2.", ("x", Range(0.5, 2.0))),
])
def test_parse_input_range(text, expected):
    assert parse_input_range(text) == expected


@pytest.mark.parametrize("text", ["x", "x=1", "x=a:b", "=1:2", "x=3:2", "x=1:2:3"])
def test_bad_input_range_is_a_user_error(text):
    with pytest.raises(NebisectError, match="--input-range"):
        parse_input_range(text)


def test_input_range_for_an_unknown_input_is_a_user_error():
    with pytest.raises(NebisectError, match=r"names y not among the model's inputs \(x\)"):
        lint_program(lp.softplus(), input_ranges={"y": Range(0, 1)})


# -- pattern rules ---------------------------------------------------------------------------


def test_unshifted_logsumexp_is_flagged_with_its_boundary():
    result = lint_program(lp.seed000())
    (finding,) = result.findings
    assert (finding.rule_id, finding.severity, finding.op_name) == (
        "lse-no-max-shift", "error", "lse")
    assert finding.fix == "logsumexp-max-shift"
    assert finding.details["reduction_size"] == 32
    assert finding.details["predicted_boundary"] == pytest.approx(math.log(65504 / 32))
    assert "7.6241" in finding.message
    assert result.exit_code == 1


def test_max_shifted_logsumexp_and_fp32_logsumexp_are_clean():
    assert rules_of(lp.seed000(shifted=True)) == []
    assert rules_of(lp.seed000(dtype="fp32")) == []


def test_fp16_option_makes_fp32_programs_count_as_fp16():
    assert rules_of(lp.seed000(dtype="fp32"), assume_fp16=True) == [
        ("error", "lse-no-max-shift", "lse")]
    assert rules_of(lp.softplus(dtype="fp32"), assume_fp16=True) == [
        ("error", "softplus-fp16", "softplus")]


def test_native_softplus_flagged_stable_identity_clean():
    (finding,) = lint_program(lp.softplus()).findings
    assert (finding.rule_id, finding.fix) == ("softplus-fp16", "softplus-stable")
    assert finding.details["predicted_boundary"] == pytest.approx(15 * math.log(2))
    assert rules_of(lp.softplus(stable=True)) == []
    assert rules_of(lp.softplus(dtype="fp32")) == []


def test_log_of_softmax_error_in_fp16_warning_in_fp32():
    assert rules_of(lp.log_softmax()) == [("error", "log-of-softmax", "log")]
    assert rules_of(lp.log_softmax(dtype="fp32")) == [("warning", "log-of-softmax", "log")]
    assert rules_of(lp.log_softmax(stable=True)) == []


def test_log_cumsum_exp_flagged_shifted_form_clean():
    (finding,) = lint_program(lp.logcumsumexp()).findings
    assert (finding.rule_id, finding.severity, finding.fix) == (
        "log-cumsum-exp", "error", "logcumsumexp-stable")
    assert rules_of(lp.logcumsumexp(shifted=True)) == []


def test_rms_sum_of_squares_flagged_rescaled_form_clean():
    (finding,) = lint_program(lp.rms_norm()).findings
    assert (finding.rule_id, finding.severity, finding.op_name) == (
        "rms-sum-squares-fp16", "warning", "squares")
    assert finding.fix is None
    assert finding.details["reduction_size"] == 64
    assert "sqrt(65504/64) = 32" in finding.message
    assert rules_of(lp.rms_norm(rescaled=True)) == []
    assert rules_of(lp.rms_norm(dtype="fp32")) == []


def test_data_dependent_shape_names_the_tile_and_the_output():
    (finding,) = lint_program(lp.meanpool()).findings
    assert (finding.rule_id, finding.severity, finding.op_name, finding.op_type) == (
        "data-dependent-shape", "error", "expand", "tile")
    assert finding.details["outputs"] == ["pooled"]
    assert "'pooled' [?, 16]" in finding.message
    assert finding.fix == "meanpool-static-shape"


def test_shapes_bound_to_an_input_dimension_are_clean():
    assert rules_of(lp.meanpool(static=True)) == []


@pytest.mark.parametrize("multiply, use", [(True, "mul"), (False, "softmax")])
def test_finfo_min_mask_is_inf_in_fp16(multiply, use):
    with np.errstate(over="ignore"):
        program = lp.masked_attention(multiply=multiply)
    (finding,) = lint_program(program).findings
    assert (finding.rule_id, finding.severity, finding.op_name) == (
        "fp16-inf-mask", "error", "sentinel")
    assert finding.details["use"] == use
    assert finding.details["value"] == -math.inf


def test_finfo_min_mask_in_fp32_only_flagged_when_run_in_fp16():
    program = lp.masked_attention(dtype="fp32")
    assert rules_of(program) == []
    (finding,) = lint_program(program, assume_fp16=True).findings
    assert finding.rule_id == "fp16-inf-mask"
    assert finding.details["value"] == pytest.approx(float(np.finfo(np.float32).min))


def test_fp16_safe_mask_sentinel_is_clean():
    assert rules_of(lp.masked_attention(sentinel=-1e4)) == []


def test_out_of_range_constant_flagged_only_in_fp16():
    assert rules_of(lp.big_constant()) == []
    (finding,) = lint_program(lp.big_constant(), assume_fp16=True).findings
    assert (finding.rule_id, finding.details["count"], finding.details["value"]) == (
        "fp16-const-out-of-range", 4, 1.0e5)
    assert rules_of(lp.big_constant(value=6.0e4), assume_fp16=True) == []


def test_clip_bound_of_inf_is_not_a_mask():
    # the mean-pool's clamp(min=1e-9) carries beta=inf: a bound, not data
    program = lp.meanpool(static=True)
    assert rules_of(program, assume_fp16=True) == []


def test_findings_are_ordered_by_severity_then_program_order():
    program = lp.seed000(delta=False)
    result = lint_program(program, input_ranges={"x": Range(-15, 15)})
    assert [(f.severity, f.rule_id) for f in result.findings] == [
        ("error", "lse-no-max-shift"), ("warning", "fp16-range-overflow")]
    assert result.counts() == {"error": 1, "warning": 1, "note": 0}

"""The oracle: dtype-aware comparison, mismatch kinds, the verdict a comparison makes."""

from __future__ import annotations

import numpy as np
import pytest

from nebisect.oracle import compare, judge
from nebisect.verdict import Comparison, ErrorMetrics, Tolerance, Verdict


def test_exact_and_one_ulp_pass_fp16() -> None:
    ref = np.array([1.0, 2.0, 11.0971], dtype=np.float64)
    out = ref.astype(np.float16)
    result = compare("y", ref, out, "fp16")
    assert result.passed and result.kind == ""
    assert result.max_ulp_error <= 1.0


def test_collapse_is_named_and_reports_needed_tolerance() -> None:
    ref = np.full((1, 16), 11.0971)
    out = np.zeros((1, 16), dtype=np.float16)
    result = compare("y", ref, out, "fp16")
    assert not result.passed and result.kind == "collapse"
    assert result.worst_reference == pytest.approx(11.0971)
    assert result.worst_output == 0.0
    assert result.required_ulps > result.tolerance.ulps == 16.0


def test_nan_suppressed_reference_nan_output_finite() -> None:
    ref = np.array([np.nan, 1.0])
    out = np.array([1.0, 1.0], dtype=np.float16)
    assert compare("y", ref, out, "fp16").kind == "nan-suppressed"


def test_nonfinite_output_for_finite_reference() -> None:
    ref = np.array([3.0, 1.0])
    out = np.array([np.inf, 1.0])
    assert compare("y", ref, out, "fp16").kind == "nonfinite"


def test_out_of_range_reference_is_not_a_device_bug() -> None:
    ref = np.array([70000.0, 1.0])
    out = np.array([np.inf, 1.0], dtype=np.float16)
    result = compare("y", ref, out, "fp16")
    assert result.passed and result.out_of_range == 1
    assert not compare("y", ref, out.astype(np.float32), "fp32").passed


def test_shape_mismatch() -> None:
    result = compare("y", np.zeros((1, 4)), np.zeros((4,)), "fp32")
    assert result.kind == "shape" and "[4]" in result.detail


def test_tolerance_kind_and_ulp_scale() -> None:
    ref = np.array([1.0, 2.0, 4.0])
    out = ref + np.array([0.0, 0.0, 0.5])
    fp16 = compare("y", ref, out, "fp16")
    assert fp16.kind == "tolerance"
    assert fp16.max_ulp_error == pytest.approx(0.5 / np.spacing(np.float16(4.0)))
    loose = compare("y", ref, out, "fp16", Tolerance(ulps=200, floor=0))
    assert loose.passed


def test_judge_builds_verdict_with_signature_and_round_trips() -> None:
    verdict = judge({"y": np.array([11.1])}, {"y": np.array([0.0])}, "fp16")
    assert verdict.status == "mismatch" and verdict.signature == "mismatch:collapse"
    again = Verdict.from_json(verdict.to_json())
    assert again == verdict
    assert judge({"y": np.array([1.0])}, {"y": np.array([1.0])}, "fp16").status == "pass"
    missing = judge({"y": np.array([1.0])}, {}, "fp16")
    assert missing.signature == "mismatch:shape"


def test_error_metrics_are_typed_and_keep_the_verdict_json_unchanged() -> None:
    verdict = judge({"y": np.array([11.1, 1.0]), "z": np.array([2.0])},
                    {"y": np.array([0.0, 1.0]), "z": np.array([2.0])}, "fp16")
    measured = verdict.error_metrics
    assert measured is not None and [c.name for c in measured.comparisons] == ["y", "z"]
    assert measured.comparisons[0].kind == "collapse"
    assert measured.comparisons[0].tolerance == Tolerance.for_precision("fp16")
    assert measured.max_abs_error == pytest.approx(11.1) and measured.out_of_range == 0
    assert list(measured.to_dict()) == ["max_abs_error", "max_ulp_error", "min_cosine",
                                        "out_of_range", "comparisons"]
    assert measured.to_dict()["comparisons"][0]["tolerance"] == {
        "ulps": 16.0, "floor": 16.0, "min_cosine": 0.0}
    assert list(measured.to_dict()["comparisons"][0]) == [
        "name", "passed", "kind", "max_abs_error", "max_ulp_error", "cosine", "out_of_range",
        "elements", "worst_index", "worst_reference", "worst_output", "tolerance",
        "required_ulps", "detail", "precision"]
    assert measured.comparisons[0].precision == "fp16"
    again = Verdict.from_json(verdict.to_json())
    assert again.error_metrics == measured
    assert ErrorMetrics.from_dict(measured.to_dict()) == measured
    assert Comparison.from_dict(measured.comparisons[1].to_dict()) == measured.comparisons[1]
    assert Verdict("crash", "predict", "crash:SIGSEGV").error_metrics is None


def test_integer_and_bool_outputs_are_compared_exactly() -> None:
    """Issue #23: an int32 routed through float32 returns 2^24 for 2^24 + 1, one fp32 ULP
    away — within any float tolerance, and wrong."""
    reference = np.array([[3, 2**24 + 1, 7]], np.int32)
    routed = reference.astype(np.float32).astype(np.int32)
    compared = compare("y", reference, routed, "fp32")
    assert (compared.passed, compared.kind, compared.worst_index) == (False, "integer", [0, 1])
    assert compared.detail == ("integer mismatch at 1/3 elements, first y[0, 1]: "
                               "output 16777216 vs reference 16777217")
    assert judge({"y": reference}, {"y": routed}, "fp16").signature == "mismatch:integer"
    assert compare("y", reference.astype(np.int64), reference, "fp16").passed
    flags = np.array([True, False])
    assert compare("m", flags, np.array([1.0, 0.0], np.float32), "fp16").passed
    assert compare("m", flags, np.array([1.0, np.nan], np.float32), "fp16").kind == "integer"


def test_bools_where_the_reference_holds_floats_mean_something_else() -> None:
    """A converter that keeps an additive float mask (0 / -inf) as bools: the values
    "agree" where the mask is 0 and the -inf is out of range, yet a later op reads the
    bools as a condition."""
    additive = np.array([0.0, 0.0, -np.inf])
    compared = compare("masked_fill", additive, np.array([False, False, True]), "fp32")
    assert (compared.passed, compared.kind, compared.detail) == (
        False, "shape", "dtype bool where the reference is float64")
    assert compare("m", additive, np.array([0.0, 0.0, -3.4e38]), "fp32").passed


def test_infinities_out_of_range_compare_without_a_numpy_warning() -> None:
    """inf − inf where both sides are out of the precision's range is masked out of the
    comparison; numpy's RuntimeWarning about it would land in every such verdict's stderr."""
    import warnings

    reference = np.array([np.inf, 1.0, 70000.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compared = compare("y", reference, np.array([np.inf, 1.0, np.inf]), "fp16")
    assert compared.passed and compared.out_of_range == 2

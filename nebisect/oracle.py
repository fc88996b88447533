"""The oracle: a target's outputs against a float64 reference.

Errors are counted in the units of the target dtype: the allowed error at each element
is ``ulps × ulp(ref)`` plus an absolute floor scaled to the output's magnitude. A
reference value the target dtype cannot represent (|ref| > 65504 for fp16) is *out of
range* — a property of the model, not a device bug — and is excluded from the
comparison but counted. What a comparison measured is a record of
:mod:`nebisect.verdict` (:class:`~nebisect.verdict.Comparison`,
:class:`~nebisect.verdict.ErrorMetrics`), which a verdict carries.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import numpy as np

from nebisect.verdict import (
    Comparison,
    ErrorMetrics,
    Stage,
    Status,
    Tolerance,
    Verdict,
    mismatch_signature,
)

#: The numpy dtype whose spacing and range a precision is judged in (bf16 by fp32's).
_DTYPES: dict[str, type[np.floating[Any]]] = {
    "fp16": np.float16, "fp32": np.float32, "fp64": np.float64, "bf16": np.float32,
}


def ulp(values: np.ndarray, precision: str) -> np.ndarray:
    """The spacing of the target dtype at each value (float64 result)."""
    dtype = _DTYPES[precision]
    finite_max = float(np.finfo(dtype).max)
    magnitude = np.minimum(np.nan_to_num(np.abs(values), nan=0.0), finite_max).astype(dtype)
    with np.errstate(over="ignore"):
        return np.spacing(magnitude).astype(np.float64)


def compare(
    name: str,
    reference: np.ndarray,
    output: np.ndarray,
    precision: str,
    tolerance: Tolerance | None = None,
    *,
    held: bool = False,
) -> Comparison:
    """Compare ``output`` with a float64 ``reference`` in units of ``precision``.

    ``held``: the value is a state the target keeps for its next prediction. A reference
    beyond the dtype's range excuses an output, not a state: an inf or NaN where the
    reference is finite is ``nonfinite`` there (every later step reads it).

    Mismatch kinds, in the order they are decided (the first applicable wins):
    ``shape`` (the shape, or a dtype that cannot hold the reference's values: a bool
    where the reference holds floats means something else — a converter that kept a
    float mask as bools); ``nan-suppressed`` (reference NaN, output finite — a reduction that
    drops NaN); ``nonfinite`` (output inf/NaN where the in-range reference is finite);
    ``collapse`` (output ≈ 0 where |reference| is large — the Neural Engine's fp16
    overflow signature); ``tolerance``. An integer or bool reference is compared
    exactly instead (:func:`_compare_exact`): any differing element is ``integer``.
    """
    tol = tolerance or Tolerance.for_precision(precision)
    ref = np.asarray(reference, dtype=np.float64)
    out = np.asarray(output)
    result = Comparison(name=name, passed=True, elements=int(ref.size), tolerance=tol,
                        precision=precision)
    if out.shape != ref.shape:
        result.passed, result.kind = False, "shape"
        result.detail = f"shape {list(out.shape)} != reference {list(ref.shape)}"
        return result
    if ref.size == 0:
        return result
    if not np.issubdtype(out.dtype, np.number) and out.dtype != np.bool_:
        result.passed, result.kind = False, "shape"
        result.detail = f"non-numeric output dtype {out.dtype}"
        return result
    if out.dtype == np.bool_ and np.asarray(reference).dtype.kind == "f":
        result.passed, result.kind = False, "shape"
        result.detail = f"dtype bool where the reference is {np.asarray(reference).dtype}"
        return result
    if exact_dtype(np.asarray(reference).dtype):
        return _compare_exact(result, np.asarray(reference), out)
    out = out.astype(np.float64)
    limit = float(np.finfo(_DTYPES[precision]).max)
    ref_nan = np.isnan(ref)
    in_range = ~ref_nan & (np.abs(ref) <= limit)
    result.out_of_range = int(np.count_nonzero(~ref_nan & ~in_range))

    suppressed = ref_nan & ~np.isnan(out)
    if suppressed.any():
        return _fail(result, "nan-suppressed", suppressed, ref, out)
    nonfinite = (np.isfinite(ref) if held else in_range) & ~np.isfinite(out)
    if nonfinite.any():
        return _fail(result, "nonfinite", nonfinite, ref, out)

    eps = float(np.finfo(_DTYPES[precision]).eps)
    scale = float(np.max(np.abs(ref[in_range]), initial=0.0))
    allowed = tol.ulps * ulp(ref, precision) + tol.floor * scale * eps
    # Out of range, both sides may be infinite (inf - inf is NaN): those elements are
    # masked out here, and numpy's warning about them would reach the verdict's stderr.
    with np.errstate(invalid="ignore"):
        error = np.where(in_range, np.abs(out - ref), 0.0)
    unit = np.maximum(ulp(ref, precision), scale * eps if scale > 0 else np.finfo(float).tiny)
    ulp_error = error / unit
    result.max_abs_error = float(error.max())
    result.max_ulp_error = float(ulp_error.max())
    result.required_ulps = result.max_ulp_error
    result.cosine = _cosine(ref[in_range], out[in_range])
    collapse = in_range & (np.abs(out) <= 1e-6 * max(scale, 1.0)) & (np.abs(ref) >= 1.0) & (
        error > allowed
    )
    if collapse.any():
        return _fail(result, "collapse", collapse, ref, out)
    bad = in_range & (error > allowed)
    if bad.any() or result.cosine < tol.min_cosine:
        return _fail(result, "tolerance", bad if bad.any() else in_range, ref, out)
    return result


def exact_dtype(dtype: np.dtype[Any]) -> bool:
    """Are values of ``dtype`` compared exactly (integers and bools)?"""
    return dtype.kind in "iub"


def _compare_exact(result: Comparison, reference: np.ndarray, output: np.ndarray) -> Comparison:
    """An integer or bool reference: every element must be equal, whatever the target's
    precision (an id, an index or a count off by one is wrong, not imprecise). Integers
    are compared as integers (2^24 + 1 is not 2^24); the first differing element
    decides the message, with both values in full."""
    integral = exact_dtype(output.dtype)
    ref = reference.astype(np.int64)
    out = output.astype(np.int64) if integral else output.astype(np.float64)
    differs = out != ref  # NaN differs from everything
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.abs(out.astype(np.float64) - ref.astype(np.float64))
    worst = float(np.nan_to_num(error, nan=np.inf).max(initial=0.0))
    result.max_abs_error = result.max_ulp_error = result.required_ulps = worst
    result.cosine = _cosine(ref.astype(np.float64), out.astype(np.float64))
    if not differs.any():
        return result
    flat = int(np.flatnonzero(differs)[0])
    result.passed, result.kind = False, "integer"
    result.worst_index = [int(i) for i in np.unravel_index(flat, ref.shape)] if ref.ndim else []
    got, want = out.reshape(-1)[flat], int(ref.reshape(-1)[flat])
    result.worst_reference, result.worst_output = float(want), float(got)
    shown = int(got) if integral or float(got).is_integer() else float(got)
    result.detail = (f"integer mismatch at {int(np.count_nonzero(differs))}/{ref.size} "
                     f"elements, first {result.name}{result.worst_index}: output {shown} vs "
                     f"reference {want}")
    return result


def _fail(
    result: Comparison, kind: str, mask: np.ndarray, ref: np.ndarray, out: np.ndarray
) -> Comparison:
    result.passed, result.kind = False, kind
    flat = int(np.flatnonzero(mask)[0])
    index = np.unravel_index(flat, ref.shape) if ref.ndim else ()
    result.worst_index = [int(i) for i in index]
    result.worst_reference = float(ref.reshape(-1)[flat])
    result.worst_output = float(out.reshape(-1)[flat])
    count = int(np.count_nonzero(mask))
    result.detail = (
        f"{kind} at {count}/{ref.size} elements, e.g. {result.name}{result.worst_index}: "
        f"output {result.worst_output:.6g} vs reference {result.worst_reference:.6g}"
    )
    return result


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.reshape(-1), b.reshape(-1)
    if not np.isfinite(b).all() or a.size == 0:
        return float("nan") if a.size else 1.0
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 and nb == 0.0:
        return 1.0
    if na == 0.0 or nb == 0.0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


def judge(
    references: dict[str, np.ndarray],
    outputs: dict[str, np.ndarray],
    precision: str,
    tolerance: Tolerance | None = None,
    stage: str = Stage.PREDICT,
    held: Collection[str] = (),
) -> Verdict:
    """Turn per-output comparisons into one verdict (first failing output decides);
    the values ``held`` names are states (:func:`compare`'s ``held``)."""
    missing = sorted(set(references) - set(outputs))
    if missing:
        return Verdict(
            Status.MISMATCH, stage, mismatch_signature("shape"),
            message=f"outputs missing: {', '.join(missing)}",
        )
    comparisons = [
        compare(name, references[name], outputs[name], precision, tolerance,
                held=name in held)
        for name in sorted(references)
    ]
    measured = ErrorMetrics.over(comparisons)
    failing = [c for c in comparisons if not c.passed]
    if not failing:
        return Verdict(Status.PASS, stage, "pass", error_metrics=measured)
    first = failing[0]
    return Verdict(Status.MISMATCH, stage, mismatch_signature(first.kind), message=first.detail,
                   error_metrics=measured)


def value_divergence(target: dict[str, np.ndarray], reference: dict[str, np.ndarray],
                     precision: str, held: Collection[str] = ()) -> Callable[[str], str | None]:
    """One value of the target run against the reference run: its mismatch signature
    (the values ``held`` names are states: :func:`compare`'s ``held``)."""

    def check(name: str) -> str | None:
        if name not in target or name not in reference:
            return None
        compared = compare(name, reference[name], target[name], precision,
                           held=name in held)
        return None if compared.passed else mismatch_signature(compared.kind)

    return check

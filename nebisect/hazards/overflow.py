"""fp16 range hazards inside single ops: exponentials and squares that a lowering
computes before it reduces.

These are the seed's cliffs: the Neural Engine evaluates ``reduce_log_sum_exp`` and
``softplus`` by their textbook formulas in fp16, so an intermediate ``exp`` overflows
long before the result would, and the output collapses to 0.0. The same happens to
``Σ x²`` in an RMSNorm written as ``mean(x ** 2)``. Each rule is a guard-clause
pattern match; the cured forms (max-shift, the stable softplus identity, a rescale by
``max |x|``) are recognised and not flagged.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from nebisect.hazards.graph import ProgramView
from nebisect.hazards.records import LintFinding
from nebisect.hazards.registry import finding, lint_rule
from nebisect.mil.dtypes import FP16_MAX
from nebisect.mil.patterns import is_max_shifted

#: ln 2^15: where the Neural Engine's fp16 softplus collapses (coremltools #2687).
SOFTPLUS_NE_CLIFF = 15 * math.log(2.0)

#: Ops that make a value a rescaled copy of another when they divide by its maximum.
_SCALE_SOURCES = frozenset({"reduce_max", "reduce_l2_norm", "reduce_l1_norm"})
_SCALE_PASSTHROUGH = frozenset({"abs", "maximum", "clip", "add", "cast", "identity", "sqrt"})


@lint_rule(
    "lse-no-max-shift",
    severity="error",
    title="reduce_log_sum_exp without a max-shift in fp16",
    rationale=(
        "The Neural Engine lowers reduce_log_sum_exp without a max-shift: Σexp(x) "
        "overflows fp16 once max(x) > log(65504/C) and the output collapses to 0.0."
    ),
    source="coremltools issue #2690 (seed 000)",
    fix="logsumexp-max-shift",
)
def unshifted_logsumexp(view: ProgramView) -> Iterator[LintFinding]:
    for op in view.ops("reduce_log_sum_exp"):
        if not view.is_fp16(op.outputs[0]) or is_max_shifted(op):
            continue
        size = view.reduced_size(op)
        if size is None:
            where = "log(65504/C) for the reduction size C"
            boundary = None
        else:
            boundary = math.log(FP16_MAX / size)
            where = f"log(65504/{size}) = {boundary:.4f}"
        yield finding(
            view, "lse-no-max-shift", op,
            f"reduce_log_sum_exp '{op.name}' over axes {view.reduce_axes(op)} has no "
            f"max-shift: in fp16 Σexp(x) overflows once max(x) > {where} and the "
            "Neural Engine returns 0.0",
            reduction_size=size, predicted_boundary=boundary,
        )


@lint_rule(
    "softplus-fp16",
    severity="error",
    title="native softplus in fp16",
    rationale=(
        "The Neural Engine's fp16 softplus computes log(1 + exp(x)) with a 2^15 "
        "internal limit: the output collapses to 0.0 for x > ln 2^15 ≈ 10.40."
    ),
    source="coremltools issue #2687",
    fix="softplus-stable",
)
def native_softplus(view: ProgramView) -> Iterator[LintFinding]:
    for op in view.ops("softplus"):
        if not view.is_fp16(op.outputs[0]):
            continue
        yield finding(
            view, "softplus-fp16", op,
            f"softplus '{op.name}' runs in fp16: on the Neural Engine it returns 0.0 for "
            f"x > ln 2^15 = {SOFTPLUS_NE_CLIFF:.4f}; use max(x, 0) + log(1 + exp(-|x|))",
            predicted_boundary=SOFTPLUS_NE_CLIFF,
        )


@lint_rule(
    "rms-sum-squares-fp16",
    severity="warning",
    title="sum of squares feeding a mean (RMSNorm) in fp16 without a rescale",
    rationale=(
        "x² overflows fp16 once |x| > 255.9 and Σx² over N elements once "
        "|x| > sqrt(65504/N); the norm then becomes inf or 0. Rescaling x by max|x| "
        "first (as coremltools' own rms_norm lowering does) keeps squares ≤ 1."
    ),
    source="coremltools issue #2585 (RMSNorm overflows on the Neural Engine in fp16)",
    remedy="divide x by reduce_max(abs(x)) before squaring (and scale the result back), "
    "or keep the norm in fp32",
)
def rms_sum_of_squares(view: ProgramView) -> Iterator[LintFinding]:
    for op in view.ops("pow", "mul", "square", "reduce_sum_square"):
        base = _squared_operand(view, op)
        if base is None or not view.is_fp16(op.outputs[0]) or _is_rescaled(view, base):
            continue
        mean = _mean_consumer(view, op)
        if mean is None:
            continue
        size = view.reduced_size(mean) if mean.op_type.startswith("reduce_") else None
        if op.op_type == "reduce_sum_square":
            size = view.reduced_size(op)
        limit = f"sqrt(65504/{size}) = {math.sqrt(FP16_MAX / size):.3g}" if size else (
            "sqrt(65504/N)"
        )
        yield finding(
            view, "rms-sum-squares-fp16", op,
            f"'{op.name}' squares an unscaled value that '{mean.name}' averages in fp16: "
            f"x² overflows once |x| > 255.9, the sum of squares once |x| > {limit}",
            reduction_size=size,
        )


def _squared_operand(view: ProgramView, op: Any) -> Any | None:
    """The ``x`` that ``op`` squares (pow(x, 2), x * x, square(x), Σx²), else None."""
    if op.op_type in ("square", "reduce_sum_square"):
        return op.inputs["x"]
    if op.op_type == "pow":
        exponent = view.const_value(op.inputs["y"])
        if exponent is not None and exponent.size == 1 and float(exponent) == 2.0:
            return op.inputs["x"]
        return None
    left, right = view.source(op.inputs["x"]), view.source(op.inputs["y"])
    return op.inputs["x"] if left is right else None


def _mean_consumer(view: ProgramView, op: Any) -> Any | None:
    """The op that turns ``op``'s squares into a mean, if one does."""
    output = op.outputs[0]
    if op.op_type == "reduce_sum_square":
        return next((c for c in view.consumers(output) if _scales_by_const(view, c)), None)
    for child in view.consumers(output):
        if child.op_type == "reduce_mean":
            return child
        if child.op_type == "reduce_sum" and any(
            _scales_by_const(view, c) for c in view.consumers(child.outputs[0])
        ):
            return child
    return None


def _scales_by_const(view: ProgramView, op: Any) -> bool:
    """``op`` divides or multiplies by a constant (how a sum becomes a mean)."""
    if op.op_type not in ("real_div", "mul"):
        return False
    return view.const_value(op.inputs["y"]) is not None or (
        view.const_value(op.inputs["x"]) is not None
    )


def _is_rescaled(view: ProgramView, var: Any) -> bool:
    """``var`` is ``a / m`` (or ``a * (1/m)``) with ``m`` derived from a max or a norm."""
    op = view.producer(var, "real_div", "mul")
    if op is None:
        return False
    if op.op_type == "real_div":
        return _derives_from_scale(view, op.inputs["y"], depth=4)
    return any(
        _inverse_of_scale(view, op.inputs[side]) for side in ("x", "y")
    )


def _inverse_of_scale(view: ProgramView, var: Any) -> bool:
    op = view.producer(var, "inverse", "rsqrt", "real_div")
    if op is None:
        return False
    divisor = op.inputs["y"] if op.op_type == "real_div" else op.inputs["x"]
    if op.op_type == "real_div":
        numerator = view.const_value(op.inputs["x"])
        if numerator is None or not np.all(numerator == 1):
            return False
    return _derives_from_scale(view, divisor, depth=4)


def _derives_from_scale(view: ProgramView, var: Any, depth: int) -> bool:
    op = view.source(var).op
    if op is None or depth == 0:
        return False
    if op.op_type in _SCALE_SOURCES:
        return True
    if op.op_type not in _SCALE_PASSTHROUGH:
        return False
    return any(
        _derives_from_scale(view, v, depth - 1)
        for v in op.inputs.values()
        if not isinstance(v, (list, tuple)) and view.const_value(v) is None
    )

"""Constants that fp16 cannot hold.

A finite fp32 constant with |v| > 65504 becomes ±inf when its op is computed in
fp16. The common case is the attention mask sentinel ``torch.finfo(float32).min``
(−3.4e38): coremltools 9.0 treats |v| ≥ 1e38 as "infinity anyway" and casts it to
fp16 −inf (fixed upstream in coremltools PR #2669). Then ``(1 − m) · −inf`` is NaN
wherever the mask is 1, and a softmax over a fully masked row computes
``exp(−inf − (−inf)) = NaN`` — an all-NaN model that converted without a word.
Constants that reach a softmax or are multiplied into a mask are reported by
``fp16-inf-mask``; any other out-of-range constant by ``fp16-const-out-of-range``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from nebisect.hazards.graph import ProgramView
from nebisect.hazards.records import LintFinding
from nebisect.hazards.registry import finding, lint_rule
from nebisect.mil.dtypes import FP16_MAX

#: How far downstream a mask constant is followed looking for its softmax.
_MASK_REACH = 8
_MASK_SINKS = frozenset({"softmax", "reduce_log_sum_exp"})
#: Operand slots through which a constant's values become part of the data.
_DATA_SLOTS = ("x", "y", "a", "b", "values")
#: Ops where an infinite operand is a (no-op) bound, not a value.
_CLAMPS = frozenset({"clip", "maximum", "minimum"})


def _fp16_infinite(view: ProgramView, var: Any) -> np.ndarray | None:
    """The elements of a float constant that are (or become) ±inf in fp16, if any."""
    if not view.is_float(var) or var.val is None or not _computed_in_fp16(view, var):
        return None
    value = np.asarray(var.val, dtype=np.float64)
    infinite = value[np.isinf(value) | (np.abs(value) > FP16_MAX)]
    return infinite if infinite.size else None


def _computed_in_fp16(view: ProgramView, var: Any) -> bool:
    if view.is_fp16(var):
        return True
    return any(
        child.op_type == "cast" and view.is_fp16(child.outputs[0]) for child in var.child_ops
    )


def _carried(view: ProgramView, var: Any) -> bool:
    """The constant is data flowing on (an operand), not a parameter such as a clip bound."""
    for child in view.consumers(var):
        if child.op_type in _CLAMPS:
            continue
        for slot in _DATA_SLOTS:
            value = child.inputs.get(slot)
            values = value if isinstance(value, (list, tuple)) else (value,)
            if any(v is not None and view.source(v) is view.source(var) for v in values):
                return True
    return False


def _mask_use(view: ProgramView, var: Any) -> tuple[str, Any] | None:
    """How an infinite constant turns into NaN: ('mul', op) or ('softmax', op)."""
    if not _carried(view, var):
        return None
    for child in view.consumers(var):
        if child.op_type == "mul":
            return "mul", child
    frontier, seen = [var], set()
    for _ in range(_MASK_REACH):
        following = []
        for value in frontier:
            for child in value.child_ops:
                if id(child) in seen:
                    continue
                seen.add(id(child))
                if child.op_type in _MASK_SINKS:
                    return "softmax", child
                following.extend(child.outputs)
        frontier = following
    return None


def _shown(values: np.ndarray) -> str:
    extreme = float(values[np.argmax(np.abs(values))])
    return f"{extreme:.6g}"


@lint_rule(
    "fp16-inf-mask",
    severity="error",
    title="mask constant that is -inf in fp16 (finfo(float32).min) reaching a softmax",
    rationale=(
        "torch.finfo(float32).min overflows to -inf in fp16: (1 - m) * -inf is NaN "
        "where m = 1, and a fully masked softmax row is exp(-inf - (-inf)) = NaN."
    ),
    source="coremltools PR #2669 (fp16 NaN from out-of-range fp32 sentinels)",
    remedy="build masks with a finite fp16-safe sentinel (e.g. -1e4 or "
    "torch.finfo(torch.float16).min) or select() instead of multiplying by it",
)
def infinite_masks(view: ProgramView) -> Iterator[LintFinding]:
    for const in view.consts():
        var = const.outputs[0]
        infinite = _fp16_infinite(view, var)
        if infinite is None:
            continue
        use = _mask_use(view, var)
        if use is None:
            continue
        how, sink = use
        consequence = (
            f"'{sink.name}' multiplies by it: 0 × inf = NaN wherever the other factor is 0 "
            "(the unmasked positions of a (1 - m) · min mask)"
            if how == "mul"
            else f"it reaches {sink.op_type} '{sink.name}', where a fully masked row is NaN"
        )
        yield finding(
            view, "fp16-inf-mask", const,
            f"constant '{var.name}' ({_shown(infinite)}) is -inf/inf in fp16 and {consequence}",
            value=float(infinite.flat[0]), sink=sink.name, use=how,
        )


@lint_rule(
    "fp16-const-out-of-range",
    severity="error",
    title="fp32 constant beyond the fp16 range computed in fp16",
    rationale=(
        "A constant with |v| > 65504 becomes ±inf in fp16; everything computed from "
        "it is inf or NaN."
    ),
    source="coremltools PR #2669 (fp16 overflow of fp32 constants)",
    remedy="keep the constant within ±65504 (rescale the op) or keep its op in fp32",
)
def out_of_range_constants(view: ProgramView) -> Iterator[LintFinding]:
    for const in view.consts():
        var = const.outputs[0]
        infinite = _fp16_infinite(view, var)
        if infinite is None or _mask_use(view, var) is not None or all(
            child.op_type in _CLAMPS for child in view.consumers(var)
        ):
            continue
        finite = infinite[np.isfinite(infinite)]
        if not finite.size:
            continue
        yield finding(
            view, "fp16-const-out-of-range", const,
            f"constant '{var.name}' holds {finite.size} value(s) beyond ±65504 (e.g. "
            f"{_shown(finite)}) that become inf in fp16",
            count=int(finite.size), value=float(finite.flat[0]),
        )

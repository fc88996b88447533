"""Interval transfer functions of the constant affine maps: linear, matmul, conv.

Each output element is ``Σ w·v + b`` over input elements that all lie in one interval,
so its bound is a sum of per-term extremes; the bound is *attained* (the flags of
:class:`~nebisect.hazards.interval.Interval`) when one uniform input state — all at the
low or all at the high end — puts every output element at it, which is exactly the
delta-replicated regime of seed 000's centre-tap convolution.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.hazards.graph import ProgramView
from nebisect.hazards.interval import Interval, corners, transfer


def affine_bounds(
    weights: np.ndarray, bias: np.ndarray, x: Interval, *, padded: bool = False
) -> Interval:
    """Bounds of ``W·v + b`` for ``v`` with every element in ``x``; rows of ``weights``.

    With ``padded`` some terms read zero padding instead of ``v``, so each term's range
    includes 0. The result is attained (flags) when one uniform input state — all
    elements at ``x.hi`` or all at ``x.lo`` — puts every output row at the bound.
    """
    w = weights.astype(np.float64)
    low_terms, high_terms = w * x.lo, w * x.hi
    lower, upper = np.minimum(low_terms, high_terms), np.maximum(low_terms, high_terms)
    if padded:
        lower, upper = np.minimum(lower, 0.0), np.maximum(upper, 0.0)
    b = np.broadcast_to(bias.astype(np.float64), (w.shape[0],))
    with np.errstate(all="ignore"):
        row_lo, row_hi = lower.sum(axis=1) + b, upper.sum(axis=1) + b
    lo, hi = float(row_lo.min()), float(row_hi.max())
    states = [(x.lo, x.lo_exact), (x.hi, x.hi_exact)]
    with np.errstate(all="ignore"):
        responses = [(w.sum(axis=1) * v + b, ok) for v, ok in states]
    hi_exact = any(ok and np.all(r == hi) for r, ok in responses)
    lo_exact = any(ok and np.all(r == lo) for r, ok in responses)
    return Interval(lo, hi, lo_exact and not padded, hi_exact and not padded)


def _bias(view: ProgramView, op: Any, rows: int) -> np.ndarray | None:
    var = op.inputs.get("bias")
    if var is None:
        return np.zeros(rows)
    return view.const_value(var)


@transfer("linear")
def _linear(view: ProgramView, op: Any, inputs: dict[str, Any]) -> Interval | None:
    x, weight = inputs["x"], view.const_value(op.inputs["weight"])
    if x is None or weight is None:
        return None
    bias = _bias(view, op, weight.shape[0])
    return None if bias is None else affine_bounds(weight, bias, x)


@transfer("matmul")
def _matmul(view: ProgramView, op: Any, inputs: dict[str, Any]) -> Interval | None:
    x, y = inputs["x"], inputs["y"]
    if x is None or y is None:
        return None
    right = view.const_value(op.inputs["y"])
    left = view.const_value(op.inputs["x"])
    flip_x = bool(view.const_value(op.inputs.get("transpose_x")))
    flip_y = bool(view.const_value(op.inputs.get("transpose_y")))
    if right is not None and right.ndim == 2 and left is None:
        columns = right.T if flip_y else right
        return affine_bounds(columns.T, np.zeros(columns.shape[1]), x)
    if left is not None and left.ndim == 2 and right is None:
        rows = left.T if flip_x else left
        return affine_bounds(rows, np.zeros(rows.shape[0]), y)
    depth = op.inputs["x"].shape[-2 if flip_x else -1]
    if not isinstance(depth, (int, np.integer)):
        return None
    product = corners(x, y, lambda a, b: a * b)
    return Interval(product.lo * int(depth), product.hi * int(depth))


@transfer("conv")
def _conv(view: ProgramView, op: Any, inputs: dict[str, Any]) -> Interval | None:
    x, weight = inputs["x"], view.const_value(op.inputs["weight"])
    if x is None or weight is None:
        return None
    bias = _bias(view, op, weight.shape[0])
    if bias is None:
        return None
    rows = weight.reshape(weight.shape[0], -1)
    pad_type = view.const_value(op.inputs.get("pad_type"))
    pads = view.const_value(op.inputs.get("pad"))
    padded = str(pad_type) != "valid" and not (str(pad_type) == "custom" and not np.any(pads))
    if padded and str(pad_type) == "same" and _center_only(weight):
        padded = False
    return affine_bounds(rows, bias, x, padded=padded)


def _center_only(weight: np.ndarray) -> bool:
    """Only the centre tap is non-zero: "same" padding never reaches a used term."""
    spatial = weight.shape[2:]
    if any(k % 2 == 0 for k in spatial):
        return False
    centre = (slice(None), slice(None), *(k // 2 for k in spatial))
    rest = weight.copy()
    rest[centre] = 0
    return not np.any(rest)

"""Reductions: every ``reduce_*`` MIL op.

Predicted boundaries are for a delta-replicated input of value x over n reduced
elements: the accumulator of a lowering that skips the max-shift or accumulates in fp16
overflows once n·f(x) > 65504. Each states its law over n (``log(65504/n)``), which
every reduction size shares.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from nebisect.mil.dtypes import FP16_MAX
from nebisect.opspecs.ops import LN_FP16_MAX, Boundary, op_spec
from nebisect.opspecs.shapes import reduced_size, reduction_cases, shapes, single_axis

POSITIVE_REDUCE = ((0.0, 1.0), (0.0, 100.0), (0.0, 15.0))


def _sum_bound(law: str, why: str) -> Callable[[dict[str, Any]], list[Boundary]]:
    def bounds(case: dict[str, Any]) -> list[Boundary]:
        c = reduced_size(case)
        return [Boundary(law.replace("n", str(c)), FP16_MAX / c, why, law)]

    return bounds


def _square_bound(case: dict[str, Any]) -> list[Boundary]:
    c = reduced_size(case)
    return [Boundary(f"sqrt(65504/{c})", math.sqrt(FP16_MAX / c),
                     "Σx² over n equal values overflows fp16", "sqrt(65504/n)")]


def _lse_bound(case: dict[str, Any]) -> list[Boundary]:
    c = reduced_size(case)
    found = [Boundary(f"log(65504/{c})", math.log(FP16_MAX / c),
                      "Σexp(x) over n equal values overflows fp16 without the max-shift "
                      "(seed 000)", "log(65504/n)")]
    if c > 1:
        found.append(Boundary("log(65504)", LN_FP16_MAX, "exp(x) alone overflows fp16"))
    found.append(Boundary("log(2^-24)", math.log(2.0**-24),
                          "exp(x) underflows fp16 to 0, log(0) = -inf without the max-shift"))
    return found


def _prod_bound(case: dict[str, Any]) -> list[Boundary]:
    c = reduced_size(case)
    return [Boundary(f"65504^(1/{c})", FP16_MAX ** (1.0 / c),
                     "the product of n equal values, x^n, overflows fp16", "65504^(1/n)")]


def _reduce(name: str) -> Callable[..., Any]:
    def emit(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
        return getattr(mb, name)(
            x=inputs["x"], axes=params["axes"], keep_dims=params["keep_dims"]
        )

    emit.__doc__ = f"MIL {name} over an axis subset (or all axes: a rank-0 result)."
    return emit


_REDUCTIONS: dict[str, tuple[Callable[[dict[str, Any]], list[Boundary]], tuple[Any, ...]]] = {
    "reduce_log_sum_exp": (_lse_bound, ()),
    "reduce_sum": (_sum_bound("65504/n", "the sum of n equal values overflows fp16"), ()),
    "reduce_mean": (_sum_bound("65504/n", "the sum of n values before the divide overflows "
                                          "fp16"), ()),
    "reduce_l1_norm": (_sum_bound("65504/n", "Σ|x| over n values overflows fp16"), ()),
    "reduce_log_sum": (_sum_bound("65504/n", "the sum of n values inside the log overflows "
                                             "fp16"), POSITIVE_REDUCE),
    "reduce_sum_square": (_square_bound, ()),
    "reduce_l2_norm": (_square_bound, ()),
    "reduce_prod": (_prod_bound, ((-2.0, 2.0), (0.0, 4.0))),
    "reduce_max": (lambda case: [], ()),
    "reduce_min": (lambda case: [], ()),
}

for _name, (_bounds, _ranges) in _REDUCTIONS.items():
    op_spec(_name, family="reduce", cases=reduction_cases, boundaries=_bounds, ranges=_ranges)(
        _reduce(_name)
    )


@st.composite
def _arg_cases(draw: st.DrawFn, dtype: str) -> dict[str, Any]:
    shape = draw(shapes(1, 4))
    return {
        "inputs": {"x": shape},
        "params": {"axis": draw(single_axis(len(shape))), "keep_dims": draw(st.booleans())},
    }


def _arg(name: str) -> Callable[..., Any]:
    def emit(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
        return getattr(mb, name)(
            x=inputs["x"], axis=params["axis"], keep_dims=params["keep_dims"]
        )

    emit.__doc__ = f"MIL {name}: the index of the extreme along one axis (int32)."
    return emit


for _name in ("reduce_argmax", "reduce_argmin"):
    op_spec(_name, family="reduce", cases=_arg_cases)(_arg(_name))

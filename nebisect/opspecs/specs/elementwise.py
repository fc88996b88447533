"""Elementwise math: unary functions (exp, log, sqrt, rsqrt, erf, trig, …) and binaries.

Unary ops whose domain is restricted (log, sqrt, asin, …) prefer values inside it, but
the value strategies still reach outside (NaN in the reference must stay NaN).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from nebisect.mil.dtypes import FP16_MAX
from nebisect.opspecs.emit import binary, scalar, unary
from nebisect.opspecs.ops import LN_FP16_MAX, Boundary, fixed, op_spec
from nebisect.opspecs.shapes import binary_cases, unary_with

POSITIVE_UNARY = ((0.0, 1.0), (0.0, 100.0), (0.0, 2.0**-14))
UNIT = ((-1.0, 1.0),)
GUARD_EPSILONS = st.sampled_from((1e-12, 1e-6, 1e-4))


_SINH = Boundary("log(2·65504)", math.log(2 * FP16_MAX), "exp(|x|)/2 overflows fp16")
_UNARY: dict[str, tuple[Callable[[dict[str, Any]], list[Boundary]], tuple[Any, ...]]] = {
    "exp": (fixed(Boundary("log(65504)", LN_FP16_MAX, "exp(x) overflows fp16")), ()),
    "exp2": (fixed(Boundary("log2(65504)", math.log2(FP16_MAX), "2^x overflows fp16")), ()),
    "sqrt": (fixed(), POSITIVE_UNARY),
    "erf": (fixed(), ()),
    "abs": (fixed(), ()),
    "ceil": (fixed(), ()),
    "floor": (fixed(), ()),
    "round": (fixed(), ()),
    "sign": (fixed(), ()),
    "sin": (fixed(), ()),
    "cos": (fixed(), ()),
    "tan": (fixed(), ()),
    "asin": (fixed(), UNIT),
    "acos": (fixed(), UNIT),
    "atan": (fixed(), ()),
    "atanh": (fixed(), UNIT),
    "sinh": (fixed(_SINH), ()),
    "cosh": (fixed(_SINH), ()),
    "square": (fixed(Boundary("sqrt(65504)", math.sqrt(FP16_MAX), "x² overflows fp16")), ()),
}
for _name, (_bounds, _ranges) in _UNARY.items():
    op_spec(_name, family="elementwise", cases=unary_with(), boundaries=_bounds, ranges=_ranges)(
        unary(_name)
    )

_EPSILON: dict[str, tuple[Callable[[dict[str, Any]], list[Boundary]], tuple[Any, ...]]] = {
    "log": (fixed(), POSITIVE_UNARY),
    "rsqrt": (fixed(), POSITIVE_UNARY),
    "inverse": (fixed(Boundary("1/65504", 1 / FP16_MAX, "1/x overflows fp16")), ()),
}
for _name, (_bounds, _ranges) in _EPSILON.items():
    op_spec(_name, family="elementwise", cases=unary_with(epsilon=GUARD_EPSILONS),
            boundaries=_bounds, ranges=_ranges)(unary(_name, "epsilon"))


@op_spec("clip", family="elementwise",
         cases=unary_with(alpha=st.sampled_from((-1.0, 0.0)), beta=st.sampled_from((1.0, 6.0))))
def _clip(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
    """MIL clip to [alpha, beta]."""
    return mb.clip(x=inputs["x"], alpha=scalar(params["alpha"], dtype),
                   beta=scalar(params["beta"], dtype))


op_spec("threshold", family="elementwise", cases=unary_with(alpha=st.sampled_from((0.0, 1.0))))(
    unary("threshold", "alpha")
)


_BINARY: dict[str, tuple[Any, ...]] = {
    "add": (), "sub": (), "mul": (), "real_div": (), "maximum": (), "minimum": (),
    "floor_div": (), "mod": (), "pow": ((0.0, 4.0), (0.0, 1.0)),
}
for _name, _ranges in _BINARY.items():
    op_spec(_name, family="binary", cases=binary_cases, ranges=_ranges)(binary(_name))

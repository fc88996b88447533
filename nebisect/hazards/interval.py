"""Forward interval analysis over a MIL program from declared input ranges.

Each value gets one interval ``[lo, hi]`` bounding all of its elements, plus two
flags saying whether the bound is *attained*: ``hi_exact`` means there is one input
assignment inside the declared ranges in which every element of the value equals
``hi`` (likewise ``lo_exact``). The flags are what turn "may overflow" into "does
overflow": ``Σ exp(x)`` over 32 channels is ``32·exp(hi)`` only if all 32 channels can
be at ``hi`` together — the delta-replicated regime of seed 000 — and the flags track
exactly that through elementwise ops, constant scalings, reductions and constant
affine maps (linear, matmul, conv — in :mod:`nebisect.hazards.interval_affine`).

Transfer functions are registered per op type with :func:`transfer`; an op without
one gets no interval (``None``), so the analysis is sound by omission: it never claims
a bound it did not derive. It is cheap (one pass, a few numpy reductions over weights)
and knows nothing of the rules that read it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nebisect.hazards.graph import ProgramView
from nebisect.registry import ImportOnce, Registry


@dataclass(frozen=True)
class Interval:
    lo: float
    hi: float
    lo_exact: bool = False
    hi_exact: bool = False

    @classmethod
    def point(cls, value: float) -> Interval:
        return cls(value, value, True, True)

    @property
    def magnitude(self) -> float:
        return max(abs(self.lo), abs(self.hi))

    @property
    def is_point(self) -> bool:
        return self.lo == self.hi and self.lo_exact and self.hi_exact

    def map_increasing(self, f: Callable[[float], float]) -> Interval:
        return Interval(f(self.lo), f(self.hi), self.lo_exact, self.hi_exact)

    def map_decreasing(self, f: Callable[[float], float]) -> Interval:
        return Interval(f(self.hi), f(self.lo), self.hi_exact, self.lo_exact)

    def inexact(self) -> Interval:
        return Interval(self.lo, self.hi)

    def hull(self, other: Interval) -> Interval:
        if self == other:
            return self
        return Interval(min(self.lo, other.lo), max(self.hi, other.hi))


Transfer = Callable[[ProgramView, Any, dict[str, Any]], "Interval | None"]

#: Transfer functions by op type; loading imports the modules with more of them (they
#: import this one, so they are loaded lazily).
TRANSFERS: Registry[str, Transfer] = Registry(
    "interval transfer", ImportOnce(lambda: ("nebisect.hazards.interval_affine",))
)


def transfer(*op_types: str) -> Callable[[Transfer], Transfer]:
    """Register an interval transfer function for ``op_types`` (duplicates are errors)."""

    def decorate(fn: Transfer) -> Transfer:
        return TRANSFERS.register_all(op_types, fn)

    return decorate


def analyze(view: ProgramView) -> dict[int, Interval]:
    """Intervals of every value derivable from ``view.input_ranges``, keyed by ``id(var)``."""
    known: dict[int, Interval] = {}
    for _, function in view.functions():
        for name, var in function.inputs.items():
            declared = view.input_ranges.get(name)
            if declared is not None:
                known[id(var)] = Interval(declared.lo, declared.hi, True, True)
    for op in view.consts():
        value = op.outputs[0].val
        if value is not None and np.asarray(value).dtype.kind in "fiub":
            array = np.asarray(value, dtype=np.float64)
            if array.size:
                lo, hi = float(array.min()), float(array.max())
                known[id(op.outputs[0])] = Interval(lo, hi, lo == hi, lo == hi)
    for op in view.ops():
        if op.op_type not in TRANSFERS:
            continue
        fn = TRANSFERS.get(op.op_type)
        inputs = {
            name: [known.get(id(v)) for v in value] if isinstance(value, (list, tuple))
            else known.get(id(value))
            for name, value in op.inputs.items()
        }
        result = fn(view, op, inputs)
        if result is not None and not (math.isnan(result.lo) or math.isnan(result.hi)):
            for out in op.outputs:
                known[id(out)] = result
    return known


# -- elementwise unary -------------------------------------------------------------------


def _safe(f: Callable[[float], float]) -> Callable[[float], float]:
    def wrapped(v: float) -> float:
        with np.errstate(all="ignore"):
            return float(f(v))

    return wrapped


_INCREASING: dict[str, Callable[[float], float]] = {
    "exp": _safe(np.exp),
    "exp2": _safe(np.exp2),
    "log": _safe(np.log),
    "sqrt": _safe(np.sqrt),
    "sigmoid": _safe(lambda v: 1.0 / (1.0 + np.exp(-v))),
    "tanh": _safe(np.tanh),
    "softplus": _safe(lambda v: np.logaddexp(0.0, v)),
    "relu": _safe(lambda v: max(v, 0.0)),
    "erf": _safe(math.erf),
    "atan": _safe(np.arctan),
    "floor": _safe(np.floor),
    "ceil": _safe(np.ceil),
    "round": _safe(np.round),
    "cast": float,
    "identity": float,
}


#: Domains of the increasing functions that have one: an input interval reaching
#: outside gives no bound (log(0) = -inf is a domain hazard, not a range one).
_DOMAINS: dict[str, Callable[[float], bool]] = {
    "log": lambda lo: lo > 0,
    "sqrt": lambda lo: lo >= 0,
}


@transfer(*_INCREASING)
def _increasing(view: ProgramView, op: Any, inputs: dict[str, Any]) -> Interval | None:
    x = inputs["x"]
    inside = _DOMAINS.get(op.op_type, lambda lo: True)
    if x is None or not inside(x.lo):
        return None
    return x.map_increasing(_INCREASING[op.op_type])


@transfer("abs", "square")
def _even(view: ProgramView, op: Any, inputs: dict[str, Any]) -> Interval | None:
    x = inputs["x"]
    if x is None:
        return None
    power = 1 if op.op_type == "abs" else 2
    return even_power(x, power)


def even_power(x: Interval, power: int) -> Interval:
    """``|x| ** power`` (``x ** power`` for even powers) with the attained flags."""
    if x.lo >= 0:
        return x.map_increasing(lambda v: v**power)
    if x.hi <= 0:
        return x.map_decreasing(lambda v: abs(v) ** power)
    top_exact = x.hi_exact if x.hi >= -x.lo else x.lo_exact
    return Interval(0.0, x.magnitude**power, False, top_exact)


@transfer("inverse", "rsqrt")
def _reciprocal(view: ProgramView, op: Any, inputs: dict[str, Any]) -> Interval | None:
    x = inputs["x"]
    if x is None:
        return None
    eps = view.const_value(op.inputs.get("epsilon"))
    shifted = x if eps is None else _shift(x, float(eps))
    if shifted.lo <= 0 <= shifted.hi:
        return None
    if op.op_type == "rsqrt":
        return shifted.map_decreasing(_safe(lambda v: 1.0 / math.sqrt(v)))
    return shifted.map_decreasing(_safe(lambda v: 1.0 / v))


def _shift(x: Interval, c: float) -> Interval:
    return Interval(x.lo + c, x.hi + c, x.lo_exact, x.hi_exact)


@transfer("clip")
def _clip(view: ProgramView, op: Any, inputs: dict[str, Any]) -> Interval | None:
    x, alpha, beta = inputs["x"], inputs.get("alpha"), inputs.get("beta")
    if x is None or alpha is None or beta is None:
        return None
    return x.map_increasing(lambda v: min(max(v, alpha.lo), beta.hi))


# -- elementwise binary ------------------------------------------------------------------


def corners(x: Interval, y: Interval, f: Callable[[float, float], float]) -> Interval:
    """The hull of ``f`` at the four corners (f monotone in each argument)."""
    with np.errstate(all="ignore"):
        values = [f(a, b) for a in (x.lo, x.hi) for b in (y.lo, y.hi)]
    values = [0.0 if math.isnan(v) else v for v in values]
    return Interval(min(values), max(values))


@transfer("add", "sub", "mul", "real_div", "maximum", "minimum")
def _binary(view: ProgramView, op: Any, inputs: dict[str, Any]) -> Interval | None:
    kind = op.op_type
    if kind == "sub" and view.max_shift(op.outputs[0]) is not None:
        a = inputs["x"]
        return None if a is None else Interval(a.lo - a.hi, 0.0, False, a.hi_exact or a.lo_exact)
    if kind == "real_div" and _divides_by_own_max_abs(view, op):
        return Interval(-1.0, 1.0)
    x, y = inputs["x"], inputs["y"]
    if x is None or y is None:
        return None
    if kind == "mul" and view.source(op.inputs["x"]) is view.source(op.inputs["y"]):
        return even_power(x, 2)
    if y.is_point and (kind != "real_div" or y.lo != 0):
        return _with_point(kind, x, y.lo, point_right=True)
    if x.is_point and kind != "real_div":
        return _with_point(kind, y, x.lo, point_right=False)
    return _general(kind, x, y)


def _divides_by_own_max_abs(view: ProgramView, op: Any) -> bool:
    """``a / m`` with ``m ≥ max|a|`` (``reduce_max(abs(a))``, optionally raised by a
    non-negative constant): the quotient lies in [-1, 1] — the RMSNorm rescale."""
    divisor = view.source(op.inputs["y"]).op
    while divisor is not None and divisor.op_type in ("maximum", "add"):
        operands = [divisor.inputs["x"], divisor.inputs["y"]]
        constants = [view.const_value(v) for v in operands]
        if sum(c is not None for c in constants) != 1 or any(
            c is not None and np.any(c < 0) for c in constants
        ):
            return False
        divisor = view.source(operands[0] if constants[1] is not None else operands[1]).op
    if divisor is None or divisor.op_type != "reduce_max":
        return False
    magnitude = view.producer(divisor.inputs["x"], "abs")
    return magnitude is not None and (
        view.source(magnitude.inputs["x"]) is view.source(op.inputs["x"])
    )


def _with_point(kind: str, x: Interval, c: float, *, point_right: bool) -> Interval:
    """``x ∘ c`` (or ``c ∘ x``) for a uniform constant ``c``: exactness survives."""
    if kind == "add":
        return _shift(x, c)
    if kind == "sub":
        return _shift(x, -c) if point_right else x.map_decreasing(lambda v: c - v)
    if kind in ("mul", "real_div"):
        factor = c if kind == "mul" else 1.0 / c
        if factor == 0:
            return Interval.point(0.0)
        scale = _safe(lambda v: v * factor)
        return x.map_increasing(scale) if factor > 0 else x.map_decreasing(scale)
    if kind == "maximum":
        return Interval(
            max(x.lo, c), max(x.hi, c), x.lo_exact or c >= x.lo, x.hi_exact if x.hi >= c else True
        )
    return Interval(
        min(x.lo, c), min(x.hi, c), x.lo_exact if x.lo <= c else True, x.hi_exact or c <= x.hi
    )


def _general(kind: str, x: Interval, y: Interval) -> Interval | None:
    """Plain interval arithmetic; a divisor that may be 0 gives no bound at all (the
    quotient's size then depends on correlations the analysis does not track)."""
    if kind == "real_div" and y.lo <= 0 <= y.hi:
        return None
    if kind == "add":
        return Interval(x.lo + y.lo, x.hi + y.hi)
    if kind == "sub":
        return Interval(x.lo - y.hi, x.hi - y.lo)
    if kind == "mul":
        return corners(x, y, lambda a, b: a * b)
    if kind == "real_div":
        return corners(x, y, lambda a, b: a / b)
    if kind == "maximum":
        return Interval(max(x.lo, y.lo), max(x.hi, y.hi))
    return Interval(min(x.lo, y.lo), min(x.hi, y.hi))


@transfer("pow")
def _pow(view: ProgramView, op: Any, inputs: dict[str, Any]) -> Interval | None:
    x, y = inputs["x"], inputs["y"]
    if x is None or y is None or not y.is_point:
        return None
    exponent = y.lo
    if float(exponent).is_integer() and int(exponent) % 2 == 0 and exponent > 0:
        return even_power(x, int(exponent))
    if x.lo < 0 or exponent <= 0:
        return None
    return x.map_increasing(_safe(lambda v: v**exponent))


@transfer("select")
def _select(view: ProgramView, op: Any, inputs: dict[str, Any]) -> Interval | None:
    a, b = inputs["a"], inputs["b"]
    return None if a is None or b is None else a.hull(b).inexact()


# -- shape-only ops ------------------------------------------------------------------------


@transfer(
    "reshape", "transpose", "expand_dims", "squeeze", "tile", "slice_by_index",
    "slice_by_size", "gather", "gather_along_axis", "reverse", "split", "flatten2d",
    "depth_to_space", "space_to_depth", "pixel_shuffle", "sliding_windows",
)
def _same(view: ProgramView, op: Any, inputs: dict[str, Any]) -> Interval | None:
    result: Interval | None = inputs["x"]
    return result


@transfer("concat", "stack")
def _concat(view: ProgramView, op: Any, inputs: dict[str, Any]) -> Interval | None:
    parts = inputs["values"]
    if not parts or any(p is None for p in parts):
        return None
    result = parts[0]
    for part in parts[1:]:
        result = result.hull(part)
    return result


# -- reductions --------------------------------------------------------------------------


@transfer("reduce_max", "reduce_min", "reduce_mean")
def _reduce_bounded(view: ProgramView, op: Any, inputs: dict[str, Any]) -> Interval | None:
    result: Interval | None = inputs["x"]
    return result


@transfer("reduce_sum", "reduce_sum_square", "reduce_l1_norm", "reduce_l2_norm",
          "reduce_log_sum_exp")
def _reduce_sum(view: ProgramView, op: Any, inputs: dict[str, Any]) -> Interval | None:
    x, size = inputs["x"], view.reduced_size(op)
    if x is None or size is None:
        return None
    if op.op_type == "reduce_log_sum_exp":
        return _shift(x, math.log(size))
    if op.op_type != "reduce_sum":
        x = even_power(x, 1 if op.op_type == "reduce_l1_norm" else 2)
    total = x.map_increasing(lambda v: v * size)
    return total.map_increasing(math.sqrt) if op.op_type == "reduce_l2_norm" else total


@transfer("softmax")
def _softmax(view: ProgramView, op: Any, inputs: dict[str, Any]) -> Interval | None:
    return Interval(0.0, 1.0)

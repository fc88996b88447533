"""Value strategies: how the fuzzer fills an op's inputs.

A strategy draws a small JSON *recipe* (``{"kind": "delta", "value": 7.63}``), not an
array: recipes shrink well (a kind, a value, a seed), they are what a finding reports,
and :func:`materialize` turns one into the same array on every machine. Kinds:

* ``delta`` — every element equal (seed 000's delta-replicated channels); its value
  comes from a plain range, from near an fp16 boundary (log(65504/C), ln 2^15, 65504,
  subnormals — nudged by a few ULPs) or is NaN / ±inf;
* ``uniform`` — seeded uniform values in a range;
* ``spike`` — a constant base with one element at a peak value (one-hot);
* ``inject`` — uniform values with a few NaN / +inf / −inf elements;
* ``nan_rows`` — uniform values with whole rows (last axis) set to NaN.

Arrays are rounded to the input dtype when materialized, so the value the device sees is
exactly the value the recipe names.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from hypothesis import strategies as st

from nebisect.errors import NebisectError

DTYPES = {"fp16": np.float16, "fp32": np.float32}
RANGES: tuple[tuple[float, float], ...] = (
    (-1.0, 1.0), (-15.0, 15.0), (0.0, 1.0), (-100.0, 100.0), (-2.0**-14, 2.0**-14),
)
#: fp16 landmarks: max, log(max), ln 2^15, sqrt(max), min normal, min subnormal
FP16_LANDMARKS: tuple[float, ...] = (
    65504.0, math.log(65504.0), math.log(2.0**15), math.sqrt(65504.0), 2.0**-14, 2.0**-24,
)
SPECIALS = ("nan", "inf", "-inf")
_SPECIAL_VALUES = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
VALUE_KINDS = ("delta", "uniform", "spike", "inject", "nan_rows")


def _dtype(name: str) -> Any:
    if name not in DTYPES:
        raise NebisectError(f"unknown input dtype {name!r}: one of {', '.join(DTYPES)}")
    return DTYPES[name]


def _width(dtype: str) -> Literal[16, 32]:
    return 16 if dtype == "fp16" else 32


def _inside(lo: float, hi: float, dtype: str) -> tuple[float, float]:
    """Round a range inward to values the dtype represents exactly (Hypothesis needs it)."""
    np_dtype = _dtype(dtype)
    low, high = np_dtype(lo), np_dtype(hi)
    if float(low) < lo:
        low = np.nextafter(low, np_dtype(np.inf))
    if float(high) > hi:
        high = np.nextafter(high, np_dtype(-np.inf))
    return float(low), float(high)


def _range_floats(ranges: Sequence[tuple[float, float]], dtype: str) -> st.SearchStrategy[float]:
    width = _width(dtype)
    return st.sampled_from(tuple(ranges)).flatmap(
        lambda r: st.floats(*_inside(r[0], r[1], dtype), width=width)
    )


def nudge(value: float, ulps: int, dtype: str) -> float:
    """``value`` rounded to the dtype and moved by ``ulps`` representable steps."""
    np_dtype = _dtype(dtype)
    x = np_dtype(value)
    toward = np_dtype(np.inf if ulps > 0 else -np.inf)
    with np.errstate(over="ignore"):
        for _ in range(abs(ulps)):
            x = np.nextafter(x, toward)
    return float(x)


@st.composite
def _boundary_value(draw: st.DrawFn, hints: Sequence[float], dtype: str) -> float | str:
    landmarks = tuple(dict.fromkeys((*hints, *FP16_LANDMARKS)))
    base = draw(st.sampled_from(landmarks))
    sign = draw(st.sampled_from((1.0, -1.0)))
    value = nudge(sign * base, draw(st.integers(-3, 3)), dtype)
    if math.isinf(value):  # JSON has no inf: name it like the special values
        return "inf" if value > 0 else "-inf"
    return value


def _seed() -> st.SearchStrategy[int]:
    return st.integers(0, 2**16 - 1)


#: Branch draw weights (repeats); the first entry is where shrinking heads.
_WEIGHTED = (
    "delta", "delta", "delta", "uniform", "uniform", "uniform", "boundary", "boundary",
    "spike", "special", "inject", "nan_rows",
)


def values(
    dtype: str,
    ranges: Sequence[tuple[float, float]] = (),
    hints: Sequence[float] = (),
) -> st.SearchStrategy[dict[str, Any]]:
    """Recipes for one input; ``ranges``/``hints`` come from the op spec (domain, boundaries).

    Branches are drawn with weights that favour finite values (most cliffs need no NaN)
    and shrink toward ``delta``: a failure reproducible with a constant input shrinks to
    a delta recipe.
    """
    spans = tuple(ranges) or RANGES
    uniform_fields = {
        "range": st.sampled_from(spans + tuple(r for r in RANGES if r not in spans)),
        "seed": _seed(),
    }
    plain = _range_floats(spans, dtype)
    branches: dict[str, st.SearchStrategy[dict[str, Any]]] = {
        "delta": plain.map(delta),
        "uniform": st.fixed_dictionaries(uniform_fields).map(_uniform),
        "spike": st.fixed_dictionaries({
            "base": st.sampled_from((0.0, -1.0, 1.0)),
            "peak": st.one_of(plain, _boundary_value(hints, dtype)),
            "index": st.integers(0, 2**16 - 1),
        }).map(lambda d: {"kind": "spike", **d}),
        "boundary": _boundary_value(hints, dtype).map(delta),
        "special": st.sampled_from(SPECIALS).map(delta),
        "inject": st.fixed_dictionaries({
            **uniform_fields, "special": st.sampled_from(SPECIALS), "count": st.integers(1, 4),
        }).map(lambda d: {**_uniform(d), "kind": "inject", "special": d["special"],
                          "count": d["count"]}),
        "nan_rows": st.fixed_dictionaries({**uniform_fields, "rows": st.integers(1, 4)}).map(
            lambda d: {**_uniform(d), "kind": "nan_rows", "rows": d["rows"]}
        ),
    }
    return st.sampled_from(_WEIGHTED).flatmap(branches.__getitem__)


def _uniform(fields: dict[str, Any]) -> dict[str, Any]:
    lo, hi = fields["range"]
    return {"kind": "uniform", "lo": float(lo), "hi": float(hi), "seed": int(fields["seed"])}


def delta(value: float | str) -> dict[str, Any]:
    """The delta-replicated recipe (all elements ``value``): the default cliff family."""
    return {"kind": "delta", "value": value if isinstance(value, str) else float(value)}


def _scalar(value: float | str) -> float:
    if isinstance(value, str):
        if value not in _SPECIAL_VALUES:
            raise NebisectError(f"unknown special value {value!r}: one of {', '.join(SPECIALS)}")
        return _SPECIAL_VALUES[value]
    return float(value)


def _base(recipe: dict[str, Any], size: int) -> np.ndarray:
    rng = np.random.default_rng(int(recipe["seed"]))
    return rng.uniform(float(recipe["lo"]), float(recipe["hi"]), size)


def materialize(recipe: dict[str, Any], shape: Sequence[int], dtype: str) -> np.ndarray:
    """The array a recipe names, in the input dtype; deterministic for a given recipe."""
    np_dtype = _dtype(dtype)
    size = math.prod(shape)
    kind = recipe.get("kind")
    if kind == "delta":
        flat = np.full(size, _scalar(recipe["value"]))
    elif kind == "uniform":
        flat = _base(recipe, size)
    elif kind == "spike":
        flat = np.full(size, float(recipe["base"]))
        if size:
            flat[int(recipe["index"]) % size] = _scalar(recipe["peak"])
    elif kind == "inject":
        flat = _base(recipe, size)
        rng = np.random.default_rng(int(recipe["seed"]) + 1)
        picks = rng.choice(size, min(int(recipe["count"]), size), replace=False)
        flat[picks] = _scalar(recipe["special"])
    elif kind == "nan_rows":
        flat = _base(recipe, size)
        width = shape[-1] if len(shape) else 1
        rows = max(1, size // max(width, 1))
        rng = np.random.default_rng(int(recipe["seed"]) + 1)
        for row in rng.choice(rows, min(int(recipe["rows"]), rows), replace=False):
            flat[row * width:(row + 1) * width] = np.nan
    else:
        raise NebisectError(f"unknown value recipe kind {kind!r}: one of {', '.join(VALUE_KINDS)}")
    with np.errstate(over="ignore"):
        return flat.astype(np_dtype).reshape(tuple(shape))


def describe(recipe: dict[str, Any]) -> str:
    """A short human rendering of a recipe for tables (``delta 7.63``, ``uniform[-1,1]``)."""
    kind = recipe.get("kind", "?")
    if kind == "delta":
        return f"delta {_fmt(recipe['value'])}"
    if kind == "spike":
        return f"spike {_fmt(recipe['peak'])} on {_fmt(recipe['base'])}"
    span = f"[{_fmt(recipe.get('lo', 0))},{_fmt(recipe.get('hi', 0))}]"
    if kind == "inject":
        return f"uniform{span} + {recipe['count']}×{recipe['special']}"
    if kind == "nan_rows":
        return f"uniform{span} + {recipe['rows']} NaN rows"
    return f"uniform{span}"


def _fmt(value: Any) -> str:
    return value if isinstance(value, str) else f"{float(value):.6g}"

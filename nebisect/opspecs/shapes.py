"""Shape, axis and op-case strategies shared by the op specs.

Strategies are written so that Hypothesis shrinks toward the smallest interesting case:
rank toward its minimum, every side toward 1, axis lists toward one axis. Sides come
from 1..8 and 16/32/64 (seed 000's 32 channels); the element count is capped so one
simulated case stays in the millisecond range.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from hypothesis import strategies as st

MAX_SIZE = 4096
#: one sampled list (not one_of two ranges) so that a 16 can shrink to 6 step by step
_SIDES = st.sampled_from((1, 2, 3, 4, 5, 6, 7, 8, 16, 32, 64))


@st.composite
def shapes(
    draw: st.DrawFn, min_rank: int = 1, max_rank: int = 4, max_size: int = MAX_SIZE,
    min_side: int = 1,
) -> list[int]:
    """A shape of rank in [min_rank, max_rank] whose element count is at most max_size."""
    rank = draw(st.integers(min_rank, max_rank))
    dims: list[int] = []
    remaining = max_size
    for _ in range(rank):
        side = max(min_side, min(draw(_SIDES), max(remaining, min_side)))
        dims.append(side)
        remaining = max(1, remaining // side)
    return dims


def normalize_axes(axes: Iterable[int], rank: int) -> list[int]:
    """Axes as sorted non-negative indices (MIL accepts negative axes)."""
    return sorted(a % rank for a in axes) if rank else []


@st.composite
def axis_subset(draw: st.DrawFn, rank: int) -> list[int] | None:
    """None for "all axes", or a non-empty set of axes (some spelled negatively).

    None comes first so that a failure in the all-axes class shrinks to it and then to
    rank 1 — an explicit axis list ties the rank down.
    """
    axes = draw(
        st.one_of(
            st.none(),
            st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True),
        )
    )
    if axes is None:
        return None
    negative = draw(st.lists(st.booleans(), min_size=len(axes), max_size=len(axes)))
    return [a - rank if neg else a for a, neg in zip(sorted(axes), negative, strict=True)]


@st.composite
def single_axis(draw: st.DrawFn, rank: int, lowest: int | None = None) -> int:
    """One axis, positive or negative (down to ``lowest``, default −rank)."""
    return draw(st.integers(-rank if lowest is None else lowest, rank - 1))


@st.composite
def unary_cases(
    draw: st.DrawFn,
    dtype: str,
    min_rank: int = 1,
    max_rank: int = 4,
    params: Mapping[str, st.SearchStrategy[Any]] | None = None,
) -> dict[str, Any]:
    """One input ``x`` plus fixed-strategy params."""
    shape = draw(shapes(min_rank, max_rank))
    drawn = {key: draw(strategy) for key, strategy in (params or {}).items()}
    return {"inputs": {"x": shape}, "params": drawn}


def unary_with(
    **params: st.SearchStrategy[Any],
) -> Callable[[str], st.SearchStrategy[dict[str, Any]]]:
    """An op spec's case strategy: one input ``x`` of rank 1–4 plus the given params."""
    return lambda dtype: unary_cases(dtype, params=params)


@st.composite
def reduction_cases(draw: st.DrawFn, dtype: str) -> dict[str, Any]:
    """``x`` of rank 1–4, an axis subset (None = all, a rank-0 result) and keep_dims."""
    shape = draw(shapes(1, 4))
    axes = draw(axis_subset(len(shape)))
    keep_dims = draw(st.booleans())
    return {"inputs": {"x": shape}, "params": {"axes": axes, "keep_dims": keep_dims}}


@st.composite
def axis_cases(
    draw: st.DrawFn,
    dtype: str,
    min_rank: int = 1,
    params: Mapping[str, st.SearchStrategy[Any]] | None = None,
    lowest_axis: int | None = None,
) -> dict[str, Any]:
    """``x`` plus one ``axis`` (softmax, cumsum, argsort, …)."""
    shape = draw(shapes(min_rank, 4))
    axis = draw(single_axis(len(shape), lowest_axis))
    drawn = {key: draw(strategy) for key, strategy in (params or {}).items()}
    return {"inputs": {"x": shape}, "params": {"axis": axis, **drawn}}


@st.composite
def broadcast_shape(draw: st.DrawFn, shape: list[int]) -> list[int]:
    """A shape that broadcasts against ``shape``: same, some sides 1, leading dims dropped."""
    drop = draw(st.integers(0, len(shape) - 1))
    kept = shape[drop:]
    ones = draw(st.lists(st.booleans(), min_size=len(kept), max_size=len(kept)))
    return [1 if one else side for side, one in zip(kept, ones, strict=True)]


@st.composite
def binary_cases(draw: st.DrawFn, dtype: str) -> dict[str, Any]:
    """Inputs ``x`` and ``y`` with broadcast-compatible shapes (either may be the wider)."""
    shape = draw(shapes(1, 4))
    other = draw(st.one_of(st.just(list(shape)), broadcast_shape(shape)))
    if draw(st.booleans()):
        return {"inputs": {"x": shape, "y": other}, "params": {}}
    return {"inputs": {"x": other, "y": shape}, "params": {}}


def reduced_size(case: dict[str, Any], input_name: str = "x") -> int:
    """Number of elements one output element reduces over (C in log(65504/C))."""
    shape = case["inputs"][input_name]
    params = case.get("params", {})
    if "axes" in params:
        axes = params["axes"]
        picked = range(len(shape)) if axes is None else normalize_axes(axes, len(shape))
    elif "axis" in params:
        picked = [params["axis"] % len(shape)]
    else:
        picked = range(len(shape))
    return math.prod(shape[a] for a in picked)

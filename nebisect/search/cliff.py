"""Cliff localization: pin a value-dependent failure down to two adjacent fp16 numbers.

Given a one-parameter family x → inputs(x) (by default every element of the input set to
x), an injected ``predict(x)`` and ``failing(output)``, the search brackets a transition
between a passing and a failing x and bisects it on the *ordinal index* of the
representable grid — not on floats — so it ends exactly when the two sides are
neighbouring fp16 values, after about log2(#values) predictions: 16 for the 38 657 fp16
numbers in [−15, 15], where seed 000's hand-made sweep used 2 000 points and still only
had a resolution of 0.015.

Each side of the final bracket, and every probe, is shown by ``describe``; a caller
that can name the element that breaks (``element``) and read any output there
(``describe_at``) has every output shown at that one element
(:mod:`nebisect.search.readout`), so the two sides of a cliff differ where the verdict
does.

The algorithm knows nothing of models, processes or files; the campaign injects a
``predict`` that runs an isolated case.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np

from nebisect.codec import Form, Record
from nebisect.errors import NebisectError
from nebisect.search.readout import Element

T = TypeVar("T")
#: a boundary "predicts" a cliff when it lies within 5% of it (|x| < 1: within 0.05)
PREDICTION_WINDOW = 0.05


@dataclass(frozen=True)
class Boundary(Record):
    """A value of the varied input beyond which theory predicts an overflow.

    ``label`` is the value's formula for this case (``log(65504/32)``); ``law`` the
    formula every case the same theory covers shares (``log(65504/n)``, ``n`` and the
    like named in ``why``), empty when the boundary does not depend on the case: cliffs
    predicted by one law are one root cause, whatever size each was found at.
    """

    label: str
    value: float
    why: str = ""
    law: str = ""

    @property
    def formula(self) -> str:
        """The law, or the label of a boundary that has none."""
        return self.law or self.label


@dataclass(frozen=True)
class Grid:
    """The representable values of a float dtype, indexed by a monotone integer ordinal.

    Ordinal 0 is ±0; +k is the k-th positive value, −k its negation; ±inf are the
    extreme ordinals. Adjacent ordinals are adjacent representable numbers.
    """

    name: str
    float_type: Any
    int_type: Any
    sign_bit: int

    def ordinal(self, x: float) -> int:
        if np.isnan(x):
            raise NebisectError("a cliff bracket cannot contain NaN")
        bits = int(np.array(x, dtype=self.float_type).view(self.int_type))
        magnitude = bits & (self.sign_bit - 1)
        return -magnitude if bits & self.sign_bit else magnitude

    def value(self, ordinal: int) -> float:
        bits = -ordinal | self.sign_bit if ordinal < 0 else ordinal
        return float(np.array(bits, dtype=self.int_type).view(self.float_type))

    @property
    def largest(self) -> float:
        """The largest finite value (65504 for fp16): where an intermediate overflows."""
        return float(np.finfo(self.float_type).max)

    def straddle(self, x: float) -> tuple[float, float]:
        """The largest grid value at or below ``x`` and the next one up: where a guided
        boundary is probed (the last x before theory's overflow, and the first after)."""
        k = self.ordinal(x)
        k -= self.value(k) > x
        return self.value(k), self.value(k + 1)


GRIDS = {
    "fp16": Grid("fp16", np.float16, np.uint16, 1 << 15),
    "fp32": Grid("fp32", np.float32, np.uint32, 1 << 31),
}


@dataclass
class Cliff(Record):
    """A located transition: ``lo`` and ``hi`` are adjacent values on ``grid``; its JSON
    also holds its :attr:`distance` to the predicted boundary."""

    json_form: ClassVar[Form] = Form(derived=(("distance", ""),))

    lo: float
    hi: float
    lo_fails: bool
    lo_output: Any
    hi_output: Any
    predictions: int
    grid: str = "fp16"
    ulps: int = 1
    boundaries: list[dict[str, Any]] = field(default_factory=list)
    #: the boundary theory predicts for this cliff: the nearest one, if it is close
    predicted: dict[str, Any] | None = None
    #: every prediction made, in x order: {"x", "fails", "output": describe(output)}
    probes: list[dict[str, Any]] = field(default_factory=list)
    #: the output element every output above is read at (Element.to_dict: the first
    #: element the failing side gets wrong); None when each is ``describe``'s own
    element: dict[str, Any] | None = None

    @property
    def midpoint(self) -> float:
        return (self.lo + self.hi) / 2

    @property
    def distance(self) -> float | None:
        """|observed − predicted| (None without a prediction)."""
        return None if self.predicted is None else abs(self.midpoint - self.predicted["value"])

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, default=float)

    @classmethod
    def from_json(cls, text: str) -> Cliff:
        return cls.from_dict(json.loads(text))


class _Stopped(Exception):
    """The stop condition refused a prediction; never escapes :func:`localize`."""


class _Probe(Generic[T]):
    """Predictions memoized by ordinal, counted; ``stop(x)`` is asked before each new one."""

    def __init__(self, grid: Grid, predict: Callable[[float], T],
                 failing: Callable[[T], bool], stop: Callable[[float], bool]) -> None:
        self.grid, self.predict, self.failing, self.stop = grid, predict, failing, stop
        self.seen: dict[int, tuple[T, bool]] = {}

    def __call__(self, ordinal: int) -> bool:
        if ordinal not in self.seen:
            x = self.grid.value(ordinal)
            if self.stop(x):
                raise _Stopped
            output = self.predict(x)
            self.seen[ordinal] = (output, bool(self.failing(output)))
        return self.seen[ordinal][1]

    def transition(self) -> tuple[int, int] | None:
        """The first adjacent pair of probed ordinals whose outcomes differ."""
        probed = sorted(self.seen)
        for a, b in itertools.pairwise(probed):
            if self.seen[a][1] != self.seen[b][1]:
                return a, b
        return None


def localize(
    predict: Callable[[float], T],
    failing: Callable[[T], bool],
    lo: float = -15.0,
    hi: float = 15.0,
    *,
    start: float | None = None,
    grid: str = "fp16",
    coarse: int = 8,
    describe: Callable[[T], Any] = lambda output: output,
    boundaries: Sequence[Boundary] = (),
    stop: Callable[[float], bool] = lambda x: False,
    element: Callable[[T], Element | None] | None = None,
    describe_at: Callable[[T, Element], Any] | None = None,
) -> Cliff | None:
    """Bracket and bisect a pass/fail transition of ``failing(predict(x))`` on the grid.

    Probes ``start`` (a known value, usually the finding's own, often a cache hit), then
    the ends of [lo, hi] (widened to include ``start``), then ``coarse`` points evenly
    spaced in value and as many in ordinal, until two probes disagree; then bisects
    that bracket down to adjacent values. Returns None when every probe agrees (no
    transition in this family).

    ``stop(x)`` is asked before every prediction (with its x, so a caller whose
    ``predict`` answers some x from a cache can let those through): when it says yes the
    search ends with the bracket reached so far — a cliff whose ``ulps`` is above 1 —
    or None if no bracket was found yet.

    ``element(output)`` names the element the failing side of the bracket breaks at;
    when it does (and ``describe_at`` is given) every output the cliff records is
    ``describe_at(output, element)`` instead of ``describe(output)``.
    """
    if grid not in GRIDS:
        raise NebisectError(f"unknown grid {grid!r}: one of {', '.join(GRIDS)}")
    g = GRIDS[grid]
    probe = _Probe(g, predict, failing, stop)
    with contextlib.suppress(_Stopped):
        _bracket_and_bisect(g, probe, g.ordinal(lo), g.ordinal(hi), start, coarse)
    # Bisection keeps every probe outside its bracket on one side of it, so the first
    # disagreeing neighbours are the bracket, whether the search finished or stopped.
    bracket = probe.transition()
    if bracket is None:
        return None
    a, b = bracket
    breaking = element(probe.seen[a if probe.seen[a][1] else b][0]) if element else None
    if breaking is not None and describe_at is not None:
        shown = breaking
        return _result(g, probe, a, b, lambda output: describe_at(output, shown), boundaries,
                       breaking)
    return _result(g, probe, a, b, describe, boundaries)


def _bracket_and_bisect(
    g: Grid, probe: _Probe[Any], first: int, last: int, start: float | None, coarse: int
) -> None:
    """Probe until two probes disagree, then halve their bracket down to adjacent ordinals."""
    if start is not None and np.isfinite(start):
        s = g.ordinal(start)
        first, last = min(first, s), max(last, s)
        probe(s)
    for ordinal in (first, last, *_coarse(g, first, last, coarse)):
        if probe.transition() is not None:
            break
        probe(ordinal)
    bracket = probe.transition()
    if bracket is None:
        return
    a, b = bracket
    a_fails = probe(a)
    while b - a > 1:
        mid = (a + b) // 2
        if probe(mid) == a_fails:
            a = mid
        else:
            b = mid


def _coarse(g: Grid, first: int, last: int, count: int) -> list[int]:
    """Interior probes: evenly spaced in value, then evenly spaced in ordinal (log-like)."""
    lo, hi = g.value(first), g.value(last)
    linear = [g.ordinal(float(g.float_type(lo + (hi - lo) * i / (count + 1))))
              for i in range(1, count + 1)]
    ordinal = [first + (last - first) * i // (count + 1) for i in range(1, count + 1)]
    return list(dict.fromkeys(linear + ordinal))


def _result(
    g: Grid, probe: _Probe[Any], a: int, b: int, describe: Callable[[Any], Any],
    boundaries: Sequence[Boundary], element: Element | None = None,
) -> Cliff:
    lo, hi = g.value(a), g.value(b)
    cliff = Cliff(
        lo=lo, hi=hi, lo_fails=probe.seen[a][1],
        lo_output=describe(probe.seen[a][0]), hi_output=describe(probe.seen[b][0]),
        predictions=len(probe.seen), grid=g.name, ulps=b - a,
        boundaries=[bd.to_dict() for bd in boundaries],
        probes=[{"x": g.value(k), "fails": fails, "output": describe(output)}
                for k, (output, fails) in sorted(probe.seen.items())],
        element=None if element is None else element.to_dict(),
    )
    finite = [bd for bd in boundaries if np.isfinite(bd.value)]
    if finite:
        nearest = min(finite, key=lambda bd: abs(bd.value - cliff.midpoint))
        if abs(nearest.value - cliff.midpoint) <= PREDICTION_WINDOW * max(1.0, abs(nearest.value)):
            cliff.predicted = nearest.to_dict()
    return cliff

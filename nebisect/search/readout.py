"""What each side of a cliff shows: one output element, the one that breaks, on both sides.

A cliff's two outputs are read at the same element — the first element the failing
side's verdict got wrong (the first failing comparison's ``worst_index``) — so they
differ where the verdict does. A scaled normal whose largest element collapses shows
that element going from 11.09 to 0, not an untouched first element printing the same
number on both sides.

Outputs are the arrays a judged case returns: ``out:NAME`` (the target's) and
``ref:NAME`` (the reference's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from nebisect.codec import Record
from nebisect.verdict import Verdict


@dataclass(frozen=True)
class Element(Record):
    """One element of one output: ``op_out[0, 3]``."""

    output: str
    index: tuple[int, ...] = ()

    def __str__(self) -> str:
        return f"{self.output}[{', '.join(map(str, self.index))}]"


@dataclass(frozen=True)
class Reading:
    """An element's value on the target and on the reference (None: not there)."""

    output: float | None
    reference: float | None


def breaking_element(verdict: Verdict) -> Element | None:
    """The first element the verdict got wrong: its first failing, non-shape comparison's
    first failing element (None for a pass, a crash or an error)."""
    measured = verdict.error_metrics
    for comparison in measured.comparisons if measured else ():
        if not comparison.passed and comparison.kind != "shape":
            return Element(comparison.name, tuple(comparison.worst_index))
    return None


def read(arrays: Mapping[str, np.ndarray], element: Element) -> Reading:
    """``element`` of the target's and the reference's outputs in ``arrays``."""
    return Reading(_at(arrays.get(f"out:{element.output}"), element.index),
                   _at(arrays.get(f"ref:{element.output}"), element.index))


def _at(array: np.ndarray | None, index: tuple[int, ...]) -> float | None:
    if array is None:
        return None
    values = np.asarray(array)
    if values.ndim != len(index) or any(not 0 <= i < n for i, n in zip(index, values.shape,
                                                                        strict=True)):
        return None
    return float(values[index])

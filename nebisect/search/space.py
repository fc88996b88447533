"""What the exploration engine knows of a family: a named space of input sets.

A space plans labels and materializes each into an :class:`InputSet`; a
:class:`ParametricSpace` also evaluates any value of its one parameter, which is what
lets the engine localize a cliff between two adjacent fp16 values. The value families
(:mod:`nebisect.inputs.families`) are spaces over one model's inputs; the engine never
sees the model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from nebisect.codec import Record


@dataclass(frozen=True)
class Member(Record):
    """One input set's identity, without its arrays.

    ``x`` is the parameter of a one-parameter family (None otherwise); ``magnitude`` is
    the shrink key: the largest |value| over the floating inputs (NaN counts as inf;
    the length for the lengths family). It is comparable across families — a normal
    draw at scale 4.56 reaches 7.63 — so a group's smallest member is the input nearest
    a benign one, whichever family found it; within a one-parameter family it grows
    with |x|.
    """

    family: str
    label: str
    x: float | None = None
    magnitude: float = 0.0


@dataclass
class InputSet:
    """A member with its arrays (one per model input, in the input's dtype).

    ``admissible`` is False when the arrays could not be moved inside the model's input
    domains (a NaN for a ranged input, a mask without a valid position): such a set is
    not an input the model takes, and exploration skips it.
    """

    member: Member
    arrays: dict[str, np.ndarray] = field(repr=False)
    admissible: bool = True

    @property
    def label(self) -> str:
        return self.member.label


class Space(ABC):
    """A named, ordered list of input sets."""

    name: ClassVar[str] = ""

    @abstractmethod
    def plan(self) -> list[str]:
        """The member labels, in exploration order (empty: the space does not apply)."""

    @abstractmethod
    def admitted_plan(self) -> list[str]:
        """The labels the engine visits: :meth:`plan` without inadmissible members."""

    @abstractmethod
    def materialize(self, label: str) -> InputSet:
        """The input set of a planned label."""


class ParametricSpace(Space):
    """A one-parameter space ``x → input set``."""

    @abstractmethod
    def label_at(self, x: float) -> str:
        """The label of the member at ``x``."""

    @abstractmethod
    def inputs_at(self, x: float) -> InputSet:
        """The input set at any ``x``, planned or not."""

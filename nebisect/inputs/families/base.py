"""The records and base classes every value family builds on.

A family is a named, ordered, deterministic list of input sets for one model. It knows
the model only through :class:`ModelInputs` (the input descriptions, the factory's
example arrays when there are some, the lengths) and a seed; nothing runs a model here.

* :class:`~nebisect.search.space.Member` — an input set's identity (family, label,
  parameter ``x``, shrink key): JSON, what groups and reports list;
  :class:`~nebisect.search.space.InputSet` adds the arrays. Both belong to the
  exploration engine's view of a family (:mod:`nebisect.search.space`).
* :class:`ParametricFamily` — one-parameter families ``x → inputs``: a constant fill of
  value x, a normal draw scaled by x, a spike of height x. :meth:`~ParametricFamily.
  inputs_at` evaluates any x, so cliff localization can bisect the fp16 grid of x.
* :class:`VariantFamily` — a fixed list of named variants (zero slices, masks, …).

Every input the family does not vary keeps its *base* value: the example input when
the source has one (a benign start the user chose), else the generated input at the
first length. Random draws come from a generator seeded by (seed, family name), so a
family's members do not depend on which other families run, or in which order.
"""

from __future__ import annotations

import math
import zlib
from abc import abstractmethod
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from nebisect.search.space import InputSet, Member, ParametricSpace, Space
from nebisect.sources.domains import MASK, InputDomain
from nebisect.sources.inputs import DEFAULT_LENGTHS, InputDescription, generate, lengths_for

#: 2^k for k in this range are the powers of two among fp16's normal numbers (2^-14 … 2^15)
FP16_EXPONENTS = tuple(range(-14, 16))
#: a token-id bound when neither the vocabulary nor an example says more (what
#: ``nebisect.sources.inputs.generate`` draws ids below)
SAFE_TOKEN_BOUND = 1000
#: integer inputs with these words in their name are ids of another kind (segment,
#: position): no family varies them
_FIXED_WORDS = ("type", "segment", "position")


@dataclass
class ModelInputs:
    """What families know of a model: input descriptions, example arrays, lengths.

    ``vocab_size`` bounds token ids when the caller knows it (a tokenizer's size).
    ``domains`` are the declared input domains (:mod:`nebisect.sources.domains`); every
    input set a family builds is moved inside them, and a mask input that declares
    nothing is still an attention mask (a valid position in every sequence).
    """

    descriptions: list[InputDescription]
    example: dict[str, np.ndarray] | None = None
    lengths: tuple[int, ...] = DEFAULT_LENGTHS
    vocab_size: int | None = None
    domains: dict[str, InputDomain] = field(default_factory=dict)

    def role(self, desc: InputDescription) -> str:
        """``float`` (varied by value families), ``mask``, ``tokens`` or ``fixed``.

        A mask is recognised by its name (contains "mask"), a bool dtype, or, for an
        integer input, by example values that are all 0 or 1 — unless its name says
        segment, type or position: such ids are fixed (BERT's all-zero
        ``token_type_ids`` is no mask); other integer inputs are token ids.
        """
        dtype = np.dtype(desc.dtype)
        name = desc.name.lower()
        declared = self.domains.get(desc.name)
        if declared is not None and declared.kind == MASK:
            return "mask"
        example = None if self.example is None else self.example.get(desc.name)
        zero_one = example is not None and example.size > 0 and bool(
            np.isin(example, (0, 1)).all()
        )
        fixed = any(word in name for word in _FIXED_WORDS)
        if declared is None and ("mask" in name or dtype.kind == "b"
                                 or (dtype.kind in "iu" and zero_one and not fixed)):
            return "mask"
        if dtype.kind == "f":
            return "float"
        return "fixed" if fixed else "tokens"

    def names(self, role: str) -> list[str]:
        """The input names with ``role``, in the model's order."""
        return [d.name for d in self.descriptions if self.role(d) == role]

    def dtype(self, name: str) -> np.dtype[Any]:
        return np.dtype(next(d.dtype for d in self.descriptions if d.name == name))

    def base(self, seed: int) -> dict[str, np.ndarray]:
        """The example arrays when there are some, else the generated inputs at the
        first length (``nebisect.sources.inputs.generate``)."""
        if self.example is not None:
            return {name: np.array(array) for name, array in self.example.items()}
        length = lengths_for(self.descriptions, self.lengths)[0]
        return self.generated(length, seed)

    def generated(self, length: int, seed: int = 0) -> dict[str, np.ndarray]:
        """The generated inputs at ``length`` (``nebisect.sources.inputs.generate``),
        moved inside the input domains where they can be."""
        arrays = generate(self.descriptions, length, seed)
        for name in self.names("tokens"):
            # ids spread over the valid ones (a clip would pile them on the last id)
            lo, bound = self.token_range(name)
            if bound - lo < 2**31:
                arrays[name] = (lo + (arrays[name] - lo) % (bound - lo)).astype(
                    arrays[name].dtype)
        return self.into_domains(arrays) or arrays

    def domain(self, name: str) -> InputDomain | None:
        """The domain of input ``name``: declared, else a mask's, else none."""
        declared = self.domains.get(name)
        if declared is not None:
            return declared
        desc = next((d for d in self.descriptions if d.name == name), None)
        return InputDomain(MASK) if desc is not None and self.role(desc) == "mask" else None

    def into_domains(self, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray] | None:
        """``arrays`` moved inside every input's domain, or None when one cannot be."""
        moved = {}
        for name, array in arrays.items():
            domain = self.domain(name)
            projected = array if domain is None else domain.project(array)
            if projected is None:
                return None
            moved[name] = projected
        return moved

    @property
    def constrained(self) -> bool:
        """Does any input have a domain (declared, or a mask's)?"""
        return any(self.domain(d.name) is not None for d in self.descriptions)

    def token_range(self, name: str | None = None) -> tuple[int, int]:
        """``[lo, bound)``: the token ids drawn for input ``name``. The vocabulary size
        bounds them if known, else the top of the input's domain (declared, or the table
        its graph indexes; without ``name``, the smallest over the token inputs), else
        one past the largest id in the example (ids it uses are valid), else a safe
        bound."""
        if self.vocab_size is not None:
            return 0, self.vocab_size
        tokens = [name] if name is not None else self.names("tokens")
        ranged = [self.domains[token] for token in tokens if token in self.domains]
        if ranged and all(math.isfinite(d.hi) for d in ranged):
            return max(0, int(max(d.lo for d in ranged))), int(min(d.hi for d in ranged)) + 1
        if self.example is not None and tokens:
            return 0, max(int(self.example[token].max(initial=0)) for token in tokens) + 1
        return 0, SAFE_TOKEN_BOUND


def largest(arrays: Mapping[str, np.ndarray], names: Sequence[str]) -> float:
    """The shrink key of an input set: the largest |value| over the inputs ``names``
    (the floating ones), NaN counting as inf."""
    values = [np.abs(arrays[name].astype(np.float64)) for name in names]
    flat = np.concatenate([v.reshape(-1) for v in values]) if values else np.zeros(0)
    return float(np.where(np.isnan(flat), math.inf, flat).max(initial=0.0))


class Family(Space):
    """A named, ordered list of input sets for one model (registered by subclasses)."""

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    #: exploration order among families: lower first, ties by name
    priority: ClassVar[int] = 50

    def __init__(self, inputs: ModelInputs, seed: int = 0) -> None:
        self.inputs = inputs
        self.seed = seed
        self.base = inputs.base(seed)
        self._admitted: list[str] | None = None

    def rng(self) -> np.random.Generator:
        """A fresh generator seeded by (seed, family name)."""
        return np.random.default_rng([self.seed, zlib.crc32(self.name.encode())])

    @abstractmethod
    def plan(self) -> list[str]:
        """The member labels, in exploration order (empty: the family does not apply)."""

    @abstractmethod
    def materialize(self, label: str) -> InputSet:
        """The input set of a planned label."""

    def members(self) -> Iterator[InputSet]:
        for label in self.admitted_plan():
            yield self.materialize(label)

    def admitted_plan(self) -> list[str]:
        """:meth:`plan` without the members outside the model's input domains, nor those
        that moving inside made equal to an earlier member (what exploration visits)."""
        if not self.inputs.constrained:
            return self.plan()
        if self._admitted is None:
            kept, seen = [], set()
            for label in self.plan():
                candidate = self.materialize(label)
                content = tuple((name, array.dtype.str, array.shape, array.tobytes())
                                for name, array in sorted(candidate.arrays.items()))
                if candidate.admissible and content not in seen:
                    seen.add(content)
                    kept.append(label)
            self._admitted = kept
        return list(self._admitted)

    def input_set(
        self, label: str, values: dict[str, np.ndarray], *, x: float | None = None,
        magnitude: float | None = None,
    ) -> InputSet:
        """The base arrays with ``values`` replacing some, each cast to its input's dtype."""
        arrays = {
            name: np.asarray(values.get(name, array)).astype(self.inputs.dtype(name))
            for name, array in self.base.items()
        }
        moved = self.inputs.into_domains(arrays)
        if moved is not None:
            arrays = moved
        if magnitude is None:
            magnitude = largest(arrays, self.inputs.names("float"))
        return InputSet(Member(self.name, label, x, float(magnitude)), arrays,
                        admissible=moved is not None)

    @cached_property
    def normals(self) -> dict[str, np.ndarray]:
        """One standard-normal draw per floating input, from the family's seed."""
        rng = self.rng()
        return {name: rng.standard_normal(array.shape) for name, array in self.floats().items()}

    @cached_property
    def positions(self) -> dict[str, int]:
        """One flat element index per non-empty floating input, drawn from the family's
        seed: where a spike or a special value is injected."""
        rng = self.rng()
        return {name: int(rng.integers(array.size)) for name, array in self.floats().items()
                if array.size}

    def floats(self) -> dict[str, np.ndarray]:
        """Fresh float64 copies of the floating inputs' base arrays (the ones families vary)."""
        return {name: self.base[name].astype(np.float64) for name in self.inputs.names("float")}


class ParametricFamily(Family, ParametricSpace):
    """A one-parameter family ``x → input set``; members are ``inputs_at`` a schedule of x."""

    @abstractmethod
    def parameters(self) -> list[float]:
        """The x values explored, in order (the engine may evaluate others while
        localizing a cliff)."""

    @abstractmethod
    def values_at(self, x: float) -> dict[str, np.ndarray]:
        """The arrays of the inputs this family varies, at ``x``."""

    def label_at(self, x: float) -> str:
        # repr: the shortest text that reads back as the same float, so two x never share a label
        return f"{self.name}(x={float(x)!r})"

    def inputs_at(self, x: float) -> InputSet:
        return self.input_set(self.label_at(x), self.values_at(float(x)), x=float(x))

    def plan(self) -> list[str]:
        if not self.inputs.names("float"):
            return []
        return [self.label_at(x) for x in self.parameters()]

    def materialize(self, label: str) -> InputSet:
        x = next(x for x in self.parameters() if self.label_at(x) == label)
        return self.inputs_at(x)


class VariantFamily(Family):
    """A fixed, ordered set of named variants."""

    @abstractmethod
    def variants(self) -> Mapping[str, Any]:
        """label → the spec :meth:`values` builds that variant from, in order."""

    @abstractmethod
    def values(self, spec: Any) -> dict[str, np.ndarray]:
        """The arrays of the inputs this variant changes."""

    def plan(self) -> list[str]:
        return list(self.variants())

    def materialize(self, label: str) -> InputSet:
        return self.input_set(label, self.values(self.variants()[label]))


def breadth_first(values: Sequence[float], start: float) -> list[float]:
    """``values`` (sorted) in coverage order: ``start``'s nearest, the largest, the
    smallest, then the middle of each remaining gap, widest gaps first.

    A small budget then still sees both ends of a range and its middle, instead of
    the first few values of a sweep.
    """
    first = min(range(len(values)), key=lambda i: abs(values[i] - start))
    order = dict.fromkeys([first, len(values) - 1, 0])
    gaps = deque([(0, len(values) - 1)])
    while gaps:
        lo, hi = gaps.popleft()
        if hi - lo >= 2:
            mid = (lo + hi) // 2
            order.setdefault(mid)
            gaps.extend([(lo, mid), (mid, hi)])
    return [values[i] for i in order]


def signed(magnitudes: Sequence[float]) -> list[float]:
    """Each magnitude, then its negation: both signs at every scale."""
    return [v for m in magnitudes for v in (m, -m)]


def powers_of_two(exponents: Sequence[int], start: int = 0) -> list[float]:
    """2^k for ``exponents``, in :func:`breadth_first` order from 2^start."""
    return breadth_first([2.0**k for k in sorted(exponents)], 2.0**start)

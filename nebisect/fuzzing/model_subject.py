"""A whole model seen as a fuzzing subject: ``nebisect fuzz SOURCE`` (DESIGN §7, §10).

``run`` explores a model with value families in a fixed round-robin within a small
budget; ``fuzz SOURCE`` drives the *same* families with Hypothesis for a longer
campaign, with shrinking, ``--jobs`` and corpus writes. A case is JSON::

    {"path": "export", "length": 0, "family": "const", "x": 7.625}     # one-parameter
    {"path": "trace", "length": 16, "family": "zeros", "label": "rows"} # a variant

* ``path`` — the conversion path the case runs on (``""`` for a package source): a bug
  may live on one path only, so each path is a case (and a finding) of its own, as each
  is a row of ``run``'s matrix;
* ``length`` — 0 for the families' own base (the factory's example inputs), else a
  length of the flexible dimensions (the families are then built on the generated
  inputs at that length);
* ``family`` with ``x`` (a :class:`~nebisect.inputs.families.ParametricFamily`, any
  x: Hypothesis draws the family's own schedule and any fp16 value) or ``label`` (a
  variant). Lint's guided probes (:mod:`nebisect.inputs.probes`: the constant fills
  just below and above each boundary) are a branch of their own, drawn as often as
  all the families together, as ``run`` probes them first.

The dedup class is (path, family, inputs it varies, length class); the cliff family
of a case is its own family at another x — a variant's is the constant fill, the
family lint's guided probes are stated in (:mod:`nebisect.inputs.probes`), which also
give the boundaries a cliff is reported beside. Shrinking moves toward the first
family (exploration order: constant fills first), the base length and the first path.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import strategies as st

from nebisect.inputs.families import Family, InputSet, ModelInputs, ParametricFamily, build
from nebisect.mil.dtypes import FP16_MAX
from nebisect.search.cliff import GRIDS, Boundary
from nebisect.sources.inputs import DEFAULT_LENGTHS, lengths_for
from nebisect.sources.resolve import Source

#: the family a variant's finding is localized in, and the one lint's probes describe
CLIFF_FAMILY = "const"


def fp16_neighbours(boundaries: Sequence[Boundary]) -> list[float]:
    """For each finite boundary in fp16's range, the first fp16 value above it (where
    theory says the op has overflowed) and the last at or below it. The first value is
    what Hypothesis draws first (its simplest example), so a campaign opens with the
    input lint predicts to fail."""
    return [x for boundary in boundaries if 0 < boundary.value < FP16_MAX
            for x in reversed(GRIDS["fp16"].straddle(boundary.value))]


@dataclass
class ModelSubject:
    """Fuzz one resolved source's inputs with the value families (see the module doc).

    ``paths`` are the conversion paths that converted (``[""]`` for a package);
    ``guided`` lint's guided probes on the fp16 program; ``families`` the family
    names (None: all) and ``seed`` their random draws, as ``run --families/--seed``.
    """

    source: Source
    paths: list[str]
    guided: list[Boundary] = field(default_factory=list)
    families: list[str] | None = None
    seed: int = 0
    _built: dict[int, dict[str, Family]] = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        """The source as tables show it: its file name (and factory); of a multifunction
        package, with the function fuzzed (``multi.mlpackage --function decode``)."""
        name = Path(self.source.location).name
        return f"{name} --function {self.source.function}" if self.source.function else name

    @cached_property
    def lengths(self) -> list[int]:
        """0 (the base: the factory's example) when there is one, then the lengths of
        the flexible dimensions (none for a static model)."""
        flexible = any(d.flexible for d in self.source.inputs)
        generated = lengths_for(self.source.inputs, DEFAULT_LENGTHS) if flexible else []
        base = [0] if self.source.example is not None or not generated else []
        return base + generated

    def family_set(self, length: int) -> dict[str, Family]:
        """The families bound to the inputs at ``length`` (0: the base), built once."""
        if length not in self._built:
            example = self.source.example if length == 0 else None
            inputs = ModelInputs(list(self.source.inputs), example,
                                 (length,) if length else DEFAULT_LENGTHS,
                                 domains=self.source.domains)
            built = build(inputs, self.families, self.seed)
            self._built[length] = {f.name: f for f in built if f.admitted_plan()}
        return self._built[length]

    @property
    def cases(self) -> st.SearchStrategy[dict[str, Any]]:
        """Lint's guided probes (constant fills just below and above each boundary), or
        any family's member; the probes come first, so a static warning is checked
        early and a failure shrinks toward them."""
        hints = fp16_neighbours(self.guided)
        families = self.family_set(self.lengths[0])
        if not hints or not isinstance(families.get(CLIFF_FAMILY), ParametricFamily):
            return _cases(self)
        guided = st.builds(
            lambda path, x: {"path": path, "length": self.lengths[0], "family": CLIFF_FAMILY,
                             "x": x},
            st.sampled_from(self.paths), st.sampled_from(hints),
        )
        return st.one_of(guided, _cases(self))

    def input_set(self, case: dict[str, Any]) -> InputSet:
        """The arrays a case names."""
        family = self.family_set(case["length"])[case["family"]]
        if "x" in case:
            assert isinstance(family, ParametricFamily)
            return family.inputs_at(case["x"])
        return family.materialize(case["label"])

    def varied(self, case: dict[str, Any]) -> list[str]:
        """The inputs a case changes from its family's base."""
        family = self.family_set(case["length"])[case["family"]]
        arrays = self.input_set(case).arrays
        return [name for name, array in arrays.items()
                if not np.array_equal(array, family.base[name], equal_nan=True)]

    def param_class(self, case: dict[str, Any]) -> str:
        """(path, family, varied inputs, length class): a length class is the base or
        the power of two at or above the length."""
        length = case["length"]
        size = "base" if not length else f"len≤{2 ** math.ceil(math.log2(length))}"
        inputs = ",".join(self.varied(case)) or "none"
        return "/".join(part for part in (case["path"], case["family"], inputs, size) if part)

    def boundaries(self, case: dict[str, Any]) -> list[Boundary]:
        """Lint's boundaries, for the constant fill (the family they are stated in)."""
        return list(self.guided) if self.cliff_family(case) == CLIFF_FAMILY else []

    def cliff_family(self, case: dict[str, Any]) -> str:
        """The case's own family when it has a parameter, else the constant fill."""
        return cliff_family(case)

    def family(self, case: dict[str, Any], x: float) -> dict[str, Any]:
        """The case at parameter ``x`` of :meth:`cliff_family` (same path and length)."""
        return {"path": case["path"], "length": case["length"],
                "family": self.cliff_family(case), "x": float(x)}

    def family_start(self, case: dict[str, Any]) -> float | None:
        return float(case["x"]) if "x" in case else None


def cliff_family(case: dict[str, Any]) -> str:
    """The family a model case's cliff is localized in: the case's own when it has a
    parameter, else the constant fill."""
    return str(case["family"]) if "x" in case else CLIFF_FAMILY


def describe_case(case: dict[str, Any]) -> str:
    """A model case as a reader says it: ``const(x=7.625) on export, example inputs``."""
    member = f"{case['family']}(x={case['x']!r})" if "x" in case else case["label"]
    where = [f"on {case['path']}"] if case["path"] else []
    where.append(f"length {case['length']}" if case["length"] else "base inputs")
    return f"{member} {', '.join(where)}"


@st.composite
def _cases(draw: st.DrawFn, subject: ModelSubject) -> dict[str, Any]:
    path = draw(st.sampled_from(subject.paths))
    length = draw(st.sampled_from(subject.lengths))
    families = subject.family_set(length)
    name = draw(st.sampled_from(list(families)))
    family = families[name]
    case: dict[str, Any] = {"path": path, "length": length, "family": name}
    if isinstance(family, ParametricFamily):
        case["x"] = draw(st.one_of(st.sampled_from(family.parameters()),
                                   st.floats(-FP16_MAX, FP16_MAX, width=16)))
    else:
        case["label"] = draw(st.sampled_from(family.admitted_plan()))
    return case

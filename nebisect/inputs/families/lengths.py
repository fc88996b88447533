"""Flexible dimensions: the requested lengths plus both ends of every flexible range.

Seed 003 crashed at every length its reporter tried, but bugs at a range's end (length
1, the declared maximum) are common and no default length list reaches them. Each
member is the generated input at one length (:meth:`ModelInputs.generated`: token ids
inside the range the model indexes, every input inside its domain); its shrink key is the
length, so a group's smallest member is its shortest input.
"""

from __future__ import annotations

import numpy as np

from nebisect.inputs.families import value_family
from nebisect.inputs.families.base import InputSet, VariantFamily
from nebisect.sources.inputs import lengths_for


@value_family("lengths", "generated inputs at the requested lengths and at both ends of each "
              "flexible dimension's range", priority=70)
class Lengths(VariantFamily):
    def variants(self) -> dict[str, int]:
        descriptions = self.inputs.descriptions
        if not any(d.flexible for d in descriptions):
            return {}
        ends = [n for d in descriptions for lo, hi in d.dims if lo != hi for n in (lo, hi) if n > 0]
        ends += [max(shape) for d in descriptions for shape in d.enumerated]
        wanted = (*self.inputs.lengths, *ends)
        return {f"length({n})": n for n in lengths_for(descriptions, wanted)}

    def values(self, spec: int) -> dict[str, np.ndarray]:
        return self.inputs.generated(spec, self.seed)

    def materialize(self, label: str) -> InputSet:
        length = self.variants()[label]
        return self.input_set(label, self.values(length), magnitude=length)

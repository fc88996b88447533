"""Large exact integers for integer inputs: 2^24, 2^24 + 1, 2^31 − 1 and the negatives
−(2^24 + 1), −2^31, each where the input's declared domain and dtype reach it.

float32 holds every integer up to 2^24 exactly and not 2^24 + 1: a converter or device
that routes an int32 through float32 (an inserted cast, a kernel computing in floats)
silently returns 2^24 for 2^24 + 1, and only an exact comparison of an integer output
sees it (``mismatch:integer``). 2^24 is the control just below that edge; 2^31 − 1 and
−2^31 are int32's ends.

Integer inputs take part where their domain is declared (the factory's
``input_domains``, ``--input-range``), and where their example holds a negative value,
across their dtype: a token id, an index or a count is never negative, so a signed
example is arithmetic (a dividend, an offset). Any other integer input is a token id, and
an id past the vocabulary is the user's error, not a finding. Each member fills every
input that admits its value; its shrink key is the value's magnitude.
"""

from __future__ import annotations

import numpy as np

from nebisect.inputs.families import value_family
from nebisect.inputs.families.base import InputSet, VariantFamily
from nebisect.sources.domains import RANGE

#: the values tried, in exploration order
EXACT_LIMITS = (2**24, 2**24 + 1, 2**31 - 1, -(2**24 + 1), -(2**31))


@value_family("bigints", "large exact integers for integer inputs with a declared domain or "
              "a negative example value: 2^24, 2^24+1, 2^31-1, -(2^24+1), -2^31", priority=46)
class LargeIntegers(VariantFamily):
    def variants(self) -> dict[str, tuple[int, list[str]]]:
        """label → (the value, the inputs that take it), for each value some input takes."""
        found = {}
        for value in EXACT_LIMITS:
            names = [name for name in self.inputs.names("tokens") if self._admits(name, value)]
            if names:
                found[f"bigints(x={value})"] = (value, names)
        return found

    def _admits(self, name: str, value: int) -> bool:
        """Does input ``name`` take ``value`` (its domain — declared, or its dtype's for
        a signed example — and its dtype)?"""
        domain = self.inputs.domains.get(name)
        dtype = self.inputs.dtype(name)
        if dtype.kind not in "iu":
            return False
        info = np.iinfo(dtype)
        if domain is None:
            return bool(self.base[name].min(initial=0) < 0) and info.min <= value <= info.max
        return domain.kind == RANGE and domain.lo <= value <= domain.hi and (
            info.min <= value <= info.max)

    def values(self, spec: tuple[int, list[str]]) -> dict[str, np.ndarray]:
        value, names = spec
        return {name: np.full(self.base[name].shape, value, self.inputs.dtype(name))
                for name in names}

    def materialize(self, label: str) -> InputSet:
        spec = self.variants()[label]
        return self.input_set(label, self.values(spec), magnitude=float(abs(spec[0])))

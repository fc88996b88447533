"""Token ids: valid ids at the edges of the vocabulary and a seeded random draw.

An embedding gather with id 0 or the last id exercises the table's edges; a converter
that mis-sizes the table or a device that clamps indices fails there. Ids stay valid
(below the vocabulary size when known, else below a bound the example or
:data:`~nebisect.inputs.families.base.SAFE_TOKEN_BOUND` vouches for): an invalid id is
the user's error, not a finding.
"""

from __future__ import annotations

import numpy as np

from nebisect.inputs.families import value_family
from nebisect.inputs.families.base import VariantFamily

TOKEN_KINDS = ("random", "first", "last", "ascending")


@value_family("tokens", "valid token ids for integer inputs: random, all the first id, all the "
              "last id, ascending", priority=45)
class TokenIds(VariantFamily):
    def variants(self) -> dict[str, str]:
        if not self.inputs.names("tokens"):
            return {}
        return {f"tokens({kind})": kind for kind in TOKEN_KINDS}

    def values(self, spec: str) -> dict[str, np.ndarray]:
        rng = self.rng()
        found = {}
        for name in self.inputs.names("tokens"):
            lo, bound = self.inputs.token_range(name)
            shape = self.base[name].shape
            if spec == "random":
                found[name] = rng.integers(lo, bound, size=shape)
            elif spec == "ascending":
                found[name] = lo + np.arange(int(np.prod(shape))).reshape(shape) % (bound - lo)
            else:
                found[name] = np.full(shape, lo if spec == "first" else bound - 1)
        return found

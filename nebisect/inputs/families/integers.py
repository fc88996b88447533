"""Exact integers and half-integers: a seeded normal draw × scale, rounded to a step of
1 or 1/2.

Rounding ops (round, floor, ceil) and casts to int decide ties and exact values
differently on different devices (round-half-to-even vs away from zero); random floats
never land on a tie, these land on nothing else.
"""

from __future__ import annotations

import numpy as np

from nebisect.inputs.families import value_family
from nebisect.inputs.families.base import VariantFamily

SCALES = (1, 16, 256)
STEPS = {"integers": 1.0, "halves": 0.5}


@value_family("integers", "exact integers and half-integers: round(normal × scale / step) × step",
              priority=65)
class ExactIntegers(VariantFamily):
    def variants(self) -> dict[str, tuple[float, int]]:
        if not self.inputs.names("float"):
            return {}
        return {f"{kind}(scale={scale})": (step, scale)
                for scale in SCALES for kind, step in STEPS.items()}

    def values(self, spec: tuple[float, int]) -> dict[str, np.ndarray]:
        step, scale = spec
        return {name: np.rint(draw * scale / step) * step for name, draw in self.normals.items()}

"""Scaled standard normals: a seeded normal draw times 2^k, across the fp16 range.

The run matrix's own inputs are standard normal at scale 1; overflow and underflow
hazards (exp, squares, divisions by small norms) need magnitudes far from 1. Values are
clipped to ±65504 so every member is finite in fp16 (infinities are the ``special``
family's job).
"""

from __future__ import annotations

import numpy as np

from nebisect.inputs.families import value_family
from nebisect.inputs.families.base import (
    FP16_EXPONENTS,
    ParametricFamily,
    powers_of_two,
)
from nebisect.mil.dtypes import FP16_MAX


@value_family("normal", "standard normal draws scaled by x = 2^k, k over the fp16 range",
              priority=20)
class ScaledNormal(ParametricFamily):
    def parameters(self) -> list[float]:
        return powers_of_two(FP16_EXPONENTS)

    def values_at(self, x: float) -> dict[str, np.ndarray]:
        return {name: np.clip(draw * x, -FP16_MAX, FP16_MAX) for name, draw in self.normals.items()}

"""One-signed inputs: |normal draw| × x, so every element has x's sign.

Lowerings that use an identity valid only for one sign (a relu-based softplus, sqrt of
a difference, log of a sum) break when every element is negative, and random inputs are
never all one sign.
"""

from __future__ import annotations

import numpy as np

from nebisect.inputs.families import value_family
from nebisect.inputs.families.base import (
    ParametricFamily,
    powers_of_two,
    signed,
)
from nebisect.mil.dtypes import FP16_MAX


@value_family("signed", "all-positive and all-negative inputs: |normal| × x, x = ±2^k",
              priority=55)
class OneSigned(ParametricFamily):
    def parameters(self) -> list[float]:
        return signed(powers_of_two((-6, 0, 3, 6, 10, 13)))

    def values_at(self, x: float) -> dict[str, np.ndarray]:
        # |draw| kept away from 0 so that no element rounds to ±0 in fp16 at the smallest x
        return {name: np.clip(np.maximum(np.abs(draw), 2.0**-6) * x, -FP16_MAX, FP16_MAX)
                for name, draw in self.normals.items()}

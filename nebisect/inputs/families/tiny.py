"""Tiny magnitudes: every element ±x with x = 2^k from fp16's smallest normal down to its
smallest subnormal (2^-14 … 2^-24).

Devices that flush subnormals to zero, or take log / divide by a norm of such values,
fail here while the float64 reference does not. Powers of two are exact in fp16, so
each member really is subnormal (or the smallest normal) when the model reads it.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from nebisect.inputs.families import value_family
from nebisect.inputs.families.base import ParametricFamily, powers_of_two


@value_family("tiny", "every element ±x, x = 2^k from fp16's smallest normal 2^-14 down to its "
              "smallest subnormal 2^-24", priority=60)
class Tiny(ParametricFamily):
    @cached_property
    def signs(self) -> dict[str, np.ndarray]:
        rng = self.rng()
        return {name: rng.choice((-1.0, 1.0), size=array.shape)
                for name, array in self.floats().items()}

    def parameters(self) -> list[float]:
        return powers_of_two(range(-24, -13), start=-14)

    def values_at(self, x: float) -> dict[str, np.ndarray]:
        return {name: sign * x for name, sign in self.signs.items()}

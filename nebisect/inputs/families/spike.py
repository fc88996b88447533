"""One-hot spikes: one element of each floating input set to x over the base values.

A single large element is what overflows a max-free softmax or a sum of squares while
the rest of the tensor stays benign — and what a mean over random inputs never shows.
The spike's position is drawn once per input from the family's seed.
"""

from __future__ import annotations

import numpy as np

from nebisect.inputs.families import value_family
from nebisect.inputs.families.base import ParametricFamily, powers_of_two, signed


@value_family("spike", "one element of each floating input = x (±2^k, k = 0…15) over the "
              "base values", priority=30)
class Spike(ParametricFamily):
    def parameters(self) -> list[float]:
        return signed(powers_of_two(range(0, 16), start=15))

    def values_at(self, x: float) -> dict[str, np.ndarray]:
        spiked = self.floats()
        for name, position in self.positions.items():
            spiked[name].reshape(-1)[position] = x
        return spiked

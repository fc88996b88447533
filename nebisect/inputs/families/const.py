"""Constant fills: every element of every floating input equals x.

Seed 000's regime: a delta-replicated input makes all 32 channels of its
``reduce_log_sum_exp`` equal, which is when Σexp(x) overflows fp16 first — at
x > log(65504/32) ≈ 7.6241. Random inputs of the same scale rarely line the channels up,
which is why a standard-normal run misses the collapse. It is also the family lint's
guided probes use: the interval analysis's attained bound is every element at its end.
"""

from __future__ import annotations

import numpy as np

from nebisect.inputs.families import value_family
from nebisect.inputs.families.base import FP16_EXPONENTS, ParametricFamily, powers_of_two, signed


@value_family("const", "every element of each floating input = x (delta-replicated, seed 000), "
              "x = ±2^k over the fp16 range", priority=10)
class ConstantFill(ParametricFamily):
    def parameters(self) -> list[float]:
        return signed(powers_of_two(FP16_EXPONENTS))

    def values_at(self, x: float) -> dict[str, np.ndarray]:
        return {name: np.full_like(array, x) for name, array in self.floats().items()}

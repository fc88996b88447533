"""Exact special values: 0, −0, +inf, −inf and NaN, filling each floating input or
injected at one element of the base values.

The oracle judges them by its own rules: a NaN in the reference must stay NaN (a
reduction that drops it is ``nan-suppressed``, seed 002), an out-of-range reference is
not a device bug. −0 is kept exact (its sign bit set): 1/−0 is −inf.
"""

from __future__ import annotations

import numpy as np

from nebisect.inputs.families import value_family
from nebisect.inputs.families.base import VariantFamily

VALUES = {"0": 0.0, "-0": -0.0, "inf": np.inf, "-inf": -np.inf, "nan": np.nan}


@value_family("special", "exact 0, -0, ±inf and NaN: filling each floating input, or at one "
              "element of the base values", priority=35)
class SpecialValues(VariantFamily):
    def variants(self) -> dict[str, tuple[str, float]]:
        if not self.inputs.names("float"):
            return {}
        fills = {f"special(fill={text})": ("fill", value) for text, value in VALUES.items()}
        ones = {f"special(one={text})": ("one", VALUES[text]) for text in ("inf", "-inf", "nan")}
        return {**fills, **ones}

    def values(self, spec: tuple[str, float]) -> dict[str, np.ndarray]:
        how, value = spec
        arrays = self.floats()
        for name, array in arrays.items():
            if how == "fill":
                array[...] = value
            elif name in self.positions:
                array.reshape(-1)[self.positions[name]] = value
        return arrays

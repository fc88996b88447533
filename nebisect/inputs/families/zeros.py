"""All-zero slices: the whole tensor, its first and last row, its first and last column.

A zero row is a padded token or an empty channel: norms divide by 0, log of a sum of
zeros is -inf, and a softmax over a masked row has nothing to normalise. Rows are the
second-to-last axis, columns the last (a rank-1 input has only columns: elements).
"""

from __future__ import annotations

import numpy as np

from nebisect.inputs.families import value_family
from nebisect.inputs.families.base import VariantFamily

_SLICES: dict[str, tuple[int, int] | None] = {
    "zeros(tensor)": None,
    "zeros(row=first)": (-2, 0),
    "zeros(row=last)": (-2, -1),
    "zeros(column=first)": (-1, 0),
    "zeros(column=last)": (-1, -1),
}


@value_family("zeros", "all-zero slices of each floating input: the whole tensor, the first "
              "and last row, the first and last column", priority=40)
class ZeroSlices(VariantFamily):
    def variants(self) -> dict[str, tuple[int, int] | None]:
        if not self.inputs.names("float"):
            return {}
        return dict(_SLICES)

    def values(self, spec: tuple[int, int] | None) -> dict[str, np.ndarray]:
        zeroed = self.floats()
        for array in zeroed.values():
            if spec is None:
                array[...] = 0.0
            elif array.ndim >= -spec[0]:
                axis, position = spec
                index: list[int | slice] = [slice(None)] * array.ndim
                index[axis] = position
                array[tuple(index)] = 0.0
        return zeroed

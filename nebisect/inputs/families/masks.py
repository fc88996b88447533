"""Attention masks: all ones, all zeros, left-padded and right-padded.

Seed 003's masked mean-pool divides by the mask's sum: an all-zero mask is 0/0, and a
padded mask is what a batch of different lengths looks like. Padding runs along the
last axis and covers half of it (at least one position).
"""

from __future__ import annotations

import numpy as np

from nebisect.inputs.families import value_family
from nebisect.inputs.families.base import VariantFamily

PATTERNS = ("ones", "zeros", "left-padded", "right-padded")


@value_family("masks", "mask inputs all ones, all zeros, left-padded and right-padded (half the "
              "last axis zero)", priority=42)
class Masks(VariantFamily):
    def variants(self) -> dict[str, str]:
        if not self.inputs.names("mask"):
            return {}
        return {f"mask({pattern})": pattern for pattern in PATTERNS}

    def values(self, spec: str) -> dict[str, np.ndarray]:
        return {name: pattern(self.base[name].shape, spec) for name in self.inputs.names("mask")}


def pattern(shape: tuple[int, ...], kind: str) -> np.ndarray:
    """A 0/1 mask of ``shape``: ``ones``, ``zeros``, ``left-padded`` or ``right-padded``."""
    mask = np.ones(shape, dtype=np.int64)
    pad = max(1, shape[-1] // 2) if shape else 0
    if kind == "zeros":
        mask[...] = 0
    elif kind == "left-padded" and shape:
        mask[..., :pad] = 0
    elif kind == "right-padded" and shape:
        mask[..., shape[-1] - pad:] = 0
    return mask

"""Padding arithmetic shared by convolution and pooling kernels.

Mirrors coremltools' ``aggregated_pad``: ``same`` pads ``max(0, s*ceil(i/s) - i + k_eff - s)``
in total with the odd element after (TensorFlow), ``same_lower`` puts it before,
``custom`` reads ``pad`` as (before, after) pairs, ``valid`` pads nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from nebisect.errors import NebisectError


def effective_kernel(kernel: Sequence[int], dilations: Sequence[int]) -> list[int]:
    return [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]


def resolve_pads(
    pad_type: str,
    in_shape: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pad: Sequence[int],
) -> list[tuple[int, int]]:
    """(before, after) padding per spatial dim for a conv/pool window."""
    if pad_type == "valid":
        return [(0, 0)] * len(kernel)
    if pad_type == "custom":
        return [(pad[2 * i], pad[2 * i + 1]) for i in range(len(kernel))]
    if pad_type in ("same", "same_lower"):
        pads = []
        for size, k, s in zip(in_shape, effective_kernel(kernel, dilations), strides, strict=True):
            total = max(0, s * math.ceil(size / s) - size + k - s)
            small = total // 2
            pads.append((small, total - small) if pad_type == "same" else (total - small, small))
        return pads
    raise NebisectError(f"unknown pad_type {pad_type!r} (valid|same|same_lower|custom)")

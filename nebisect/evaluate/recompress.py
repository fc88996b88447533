"""Milder compressions of a weight, computed from its uncompressed value.

When keeping some ops' weights uncompressed makes a compressed package pass, the next
question is whether a milder compression of the same weights would too: the same bits
with a LUT (or scale) per group of channels, or more bits. Each alternative here
recomputes a weight from the baseline's value the way ``coremltools.optimize.coreml``
does in kind — k-means palettization (a 1-D Lloyd iteration from quantile centroids),
symmetric linear quantization — so its error can be measured in the simulator. The
numbers approximate coremltools' own (whose k-means differs in its initialization), so a
measured alternative is a suggestion to re-run the optimizer with, not a package.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: output channels sharing one LUT or scale in a grouped alternative
GROUP_SIZE = 16
LLOYD_ITERATIONS = 30


@dataclass(frozen=True)
class Alternative:
    """A milder compression: what to tell the optimizer, and how it turns a weight's
    uncompressed value into the value the device would decompress."""

    words: str
    apply: Callable[[np.ndarray], np.ndarray]


def alternatives(how: str) -> list[Alternative]:
    """The milder compressions to try for weights compressed as ``how`` (``2-bit
    palettized``, ``int4 linear-quantized``…), mildest change first; none for a
    compression these do not recompute."""
    for pattern, make in _ALTERNATIVES.items():
        found = re.search(pattern, how)
        if found:
            return make(int(found[1]))
    return []


def palettized(weight: np.ndarray, nbits: int, group: int | None = None) -> np.ndarray:
    """``weight`` through a ``2**nbits``-entry k-means LUT, one per ``group`` output
    channels (axis 0), or one for the whole tensor."""
    rows = np.asarray(weight, dtype=np.float64).reshape(weight.shape[0], -1)
    step = group or rows.shape[0]
    parts = [_kmeans(rows[i:i + step], 2 ** nbits) for i in range(0, rows.shape[0], step)]
    return np.concatenate(parts).reshape(weight.shape)


def quantized(weight: np.ndarray, nbits: int, block: int | None = None) -> np.ndarray:
    """``weight`` through symmetric ``nbits`` linear quantization with a scale per output
    channel (axis 0), or per ``block`` input elements of each channel."""
    rows = np.asarray(weight, dtype=np.float64).reshape(weight.shape[0], -1)
    width = block or rows.shape[1]
    levels = 2 ** (nbits - 1) - 1
    out = np.empty_like(rows)
    for start in range(0, rows.shape[1], width):
        part = rows[:, start:start + width]
        scale = np.abs(part).max(axis=1, keepdims=True) / levels
        scale[scale == 0] = 1.0
        out[:, start:start + width] = np.clip(np.round(part / scale), -levels, levels) * scale
    return out.reshape(weight.shape)


def _kmeans(values: np.ndarray, clusters: int) -> np.ndarray:
    """``values`` replaced by the nearest of ``clusters`` 1-D k-means centroids."""
    flat = values.reshape(-1)
    centroids = np.unique(np.quantile(flat, (np.arange(clusters) + 0.5) / clusters))
    for _ in range(LLOYD_ITERATIONS):
        nearest = _nearest(flat, centroids)
        sums = np.bincount(nearest, weights=flat, minlength=len(centroids))
        counts = np.bincount(nearest, minlength=len(centroids))
        moved = np.where(counts > 0, sums / np.maximum(counts, 1), centroids)
        if np.array_equal(moved, centroids):
            break
        centroids = np.sort(moved)
    return centroids[_nearest(flat, centroids)].reshape(values.shape)


def _nearest(values: np.ndarray, sorted_centroids: np.ndarray) -> np.ndarray:
    edges = (sorted_centroids[1:] + sorted_centroids[:-1]) / 2
    return np.searchsorted(edges, values)


def _palettize_alternatives(nbits: int) -> list[Alternative]:
    found = [Alternative(f"{nbits}-bit palettization with a LUT per {GROUP_SIZE} channels "
                         "(granularity='per_grouped_channel', iOS18)",
                         lambda w: palettized(w, nbits, GROUP_SIZE))]
    found += [Alternative(f"{more}-bit palettization",
                          functools.partial(palettized, nbits=more))
              for more in (nbits + 2, 8) if nbits < more <= 8]
    return found


def _quantize_alternatives(nbits: int) -> list[Alternative]:
    found = [Alternative(f"int{nbits} quantization with a scale per {GROUP_SIZE * 2} inputs "
                         "(granularity='per_block', iOS18)",
                         lambda w: quantized(w, nbits, GROUP_SIZE * 2))]
    if nbits < 8:
        found.append(Alternative("int8 quantization", lambda w: quantized(w, 8)))
    return found


#: how a weight was compressed (a pattern of its description, capturing the bits) →
#: the milder compressions to try
_ALTERNATIVES: dict[str, Callable[[int], list[Alternative]]] = {
    r"(\d+)-bit palettized": _palettize_alternatives,
    r"u?int(\d+) linear-quantized": _quantize_alternatives,
}

"""Random sampling kernels: ``random_bernoulli``, ``random_normal``, ``random_uniform``,
``random_categorical``.

Samples come from numpy's PCG64 seeded with the op's ``seed`` (``-1``, the default,
seeds from 0 so the simulator stays reproducible — a device draws fresh entropy, so
only distribution-level properties and degenerate cases like ``prob=1`` or
``stddev=0`` are comparable across backends). Categorical outputs are class indices
as floats, the op's declared dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels._args import ints, scalar, text


def _rng(seed: Any) -> np.random.Generator:
    value = -1 if seed is None else int(np.asarray(seed).item())
    return np.random.default_rng(max(value, 0))


@kernel("random_bernoulli")
def random_bernoulli(
    ctx: KernelContext, shape: Any, prob: Any = 0.5, seed: Any = -1
) -> np.ndarray:
    draws = _rng(seed).random(ints(shape))
    return (draws < scalar(prob, 0.5)).astype(ctx.dtype)


@kernel("random_normal")
def random_normal(
    ctx: KernelContext, shape: Any, mean: Any = 0.0, stddev: Any = 1.0, seed: Any = -1
) -> np.ndarray:
    draws = _rng(seed).standard_normal(ints(shape))
    return (scalar(mean, 0.0) + scalar(stddev, 1.0) * draws).astype(ctx.dtype)


@kernel("random_uniform")
def random_uniform(
    ctx: KernelContext, shape: Any, low: Any = 0.0, high: Any = 1.0, seed: Any = -1
) -> np.ndarray:
    lo, hi = scalar(low, 0.0), scalar(high, 1.0)
    return (lo + (hi - lo) * _rng(seed).random(ints(shape))).astype(ctx.dtype)


@kernel("random_categorical")
def random_categorical(
    ctx: KernelContext, x: np.ndarray, mode: Any = "logits", size: Any = 1, seed: Any = -1
) -> np.ndarray:
    """``size`` class indices per row of ``x`` (logits, or probabilities with ``probs``)."""
    x = np.asarray(x, dtype=np.float64)
    logits = np.log(x) if text(mode, "logits") == "probs" else x
    probs = np.exp(logits - logits.max(axis=-1, keepdims=True))
    cdf = np.cumsum(probs / probs.sum(axis=-1, keepdims=True), axis=-1)
    count = int(np.asarray(size).item())
    draws = _rng(seed).random((*x.shape[:-1], count))
    rows = cdf.reshape(-1, cdf.shape[-1])
    flat = draws.reshape(rows.shape[0], count)
    picks = np.stack(
        [np.searchsorted(row, d, side="right") for row, d in zip(rows, flat, strict=True)]
    )
    picks = np.minimum(picks, x.shape[-1] - 1)
    return picks.reshape(draws.shape).astype(ctx.dtype)

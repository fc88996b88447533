"""Pooling kernels: ``avg_pool`` (with ``exclude_padding_from_average``), ``max_pool``
and ``l2_pool`` over 1-3 spatial dims, every pad type and ``ceil_mode``.

Windows are reduced tap by tap over strided views. With ``ceil_mode`` the last window may
hang past the padded input; as the definition has it (``ceil_mode`` is PyTorch's), that
overhang is not counted in an average's divisor (padding is, unless excluded) and never
wins a max. The Core ML runtime divides such a window by the whole kernel instead
(``avg_pool``'s runtime variant in :mod:`nebisect.mil.semantics.coreml`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from nebisect.mil.kernels import Kernel, KernelContext, kernel
from nebisect.mil.kernels._args import flag, ints, text
from nebisect.mil.kernels._spatial import resolve_pads


def _out_dim(size: int, before: int, after: int, k: int, s: int, ceil: bool) -> int:
    total = before + after
    if not ceil:
        return (size + total - k) // s + 1
    out = math.floor((size + total - k + s - 1) / s) + 1
    if total > 0 and (out - 1) * s >= size + total / 2:
        out -= 1
    return out


def _geometry(
    sizes: tuple[int, ...], kernel_sizes: Any, strides: Any, pad_type: Any, pad: Any,
    ceil_mode: Any,
) -> tuple[list[int], list[int], list[tuple[int, int]], list[int], list[int]]:
    """Per spatial dim of an input of spatial ``sizes``: taps, stride, (before, after)
    padding, output size, and how far the last window hangs past the padded input."""
    spatial = len(sizes)
    taps = ints(kernel_sizes)
    stride = ints(strides) or [1] * spatial
    pads = resolve_pads(
        text(pad_type, "valid"), sizes, taps, stride, [1] * spatial,
        ints(pad) or [0] * 2 * spatial,
    )
    ceil = flag(ceil_mode)
    outs = [_out_dim(sizes[i], *pads[i], taps[i], stride[i], ceil) for i in range(spatial)]
    extra = [
        max(0, (o - 1) * s + k - (size + b + a))
        for o, s, k, size, (b, a) in zip(outs, stride, taps, sizes, pads, strict=True)
    ]
    return taps, stride, pads, outs, extra


def ceil_overhang(
    sizes: tuple[int, ...], kernel_sizes: Any, strides: Any, pad_type: Any, pad: Any
) -> list[int]:
    """How far ``ceil_mode``'s last window hangs past the padded input, per spatial dim
    (all zero: no window divides differently under the runtime's rule)."""
    return _geometry(sizes, kernel_sizes, strides, pad_type, pad, True)[4]


def _windows(
    x: np.ndarray, kernel_sizes: Any, strides: Any, pad_type: Any, pad: Any, ceil_mode: Any,
    fill: float,
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Per-tap strided views of the padded input, plus the per-tap masks of real input
    positions and of input-or-padding positions (for average divisors)."""
    taps, stride, pads, outs, extra = _geometry(
        x.shape[2:], kernel_sizes, strides, pad_type, pad, ceil_mode)
    widths = [(b, a + e) for (b, a), e in zip(pads, extra, strict=True)]
    xp = np.pad(x, [(0, 0), (0, 0), *widths], constant_values=fill)
    real = np.pad(np.ones(x.shape[2:], dtype=bool), widths)
    padded = np.pad(np.ones(x.shape[2:], dtype=bool), pads, constant_values=True)
    padded = np.pad(padded, [(0, e) for e in extra], constant_values=False)
    views, real_count, pad_count = [], np.zeros(outs), np.zeros(outs)
    for tap in itertools.product(*(range(k) for k in taps)):
        window = tuple(
            slice(t, t + (o - 1) * s + 1, s) for t, o, s in zip(tap, outs, stride, strict=True)
        )
        views.append(xp[(slice(None), slice(None), *window)])
        real_count += real[window]
        pad_count += padded[window]
    return views, real_count, pad_count


def _reduce(views: list[np.ndarray], op: Callable[[Any, Any], Any]) -> np.ndarray:
    acc = views[0].copy()
    for view in views[1:]:
        acc = op(acc, view)
    return acc


def average_pool(*, overhang_as_padding: bool) -> Kernel:
    """The ``avg_pool`` kernel dividing each window by the positions it covers — input,
    and padding unless excluded — or, ``overhang_as_padding``, by the whole kernel
    wherever padding is included (a ``ceil_mode`` overhang counted as padding: the Core
    ML runtime's variant, :mod:`nebisect.mil.semantics.coreml`)."""

    def avg_pool(
        ctx: KernelContext,
        x: np.ndarray,
        kernel_sizes: Any,
        strides: Any = None,
        pad_type: Any = "valid",
        pad: Any = None,
        ceil_mode: Any = False,
        exclude_padding_from_average: Any = False,
    ) -> np.ndarray:
        x = np.asarray(x)
        views, real, padded = _windows(x, kernel_sizes, strides, pad_type, pad, ceil_mode, 0.0)
        if flag(exclude_padding_from_average):
            divisor: Any = real
        else:
            divisor = math.prod(ints(kernel_sizes)) if overhang_as_padding else padded
        return (_reduce(views, np.add) / np.maximum(divisor, 1).astype(x.dtype)).astype(x.dtype)

    return avg_pool


kernel("avg_pool")(average_pool(overhang_as_padding=False))


@kernel("max_pool")
def max_pool(
    ctx: KernelContext,
    x: np.ndarray,
    kernel_sizes: Any,
    strides: Any = None,
    pad_type: Any = "valid",
    pad: Any = None,
    ceil_mode: Any = False,
) -> np.ndarray:
    x = np.asarray(x)
    views, _, _ = _windows(x, kernel_sizes, strides, pad_type, pad, ceil_mode, -np.inf)
    return _reduce(views, np.maximum)


@kernel("l2_pool")
def l2_pool(
    ctx: KernelContext,
    x: np.ndarray,
    kernel_sizes: Any,
    strides: Any = None,
    pad_type: Any = "valid",
    pad: Any = None,
    ceil_mode: Any = False,
) -> np.ndarray:
    x = np.asarray(x)
    views, _, _ = _windows(x, kernel_sizes, strides, pad_type, pad, ceil_mode, 0.0)
    return np.sqrt(_reduce([v * v for v in views], np.add))

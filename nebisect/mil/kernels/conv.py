"""Convolution kernels: ``conv`` and ``conv_transpose`` over 1-3 spatial dims with
strides, dilations, groups and every pad type.

Both loop over the kernel's taps (9 for 3x3) and do one batched matmul per tap over the
channel dims, ``(g, Cout/g, Cin/g) @ (n, g, Cin/g, positions)``: BLAS speed without an
im2col copy, and groups (depthwise included) fall out of the batch dimension. The
``naive`` variants do that matmul with a running sum in the compute dtype (fp16
accumulators under ``fp16-naive``), like the naive ``matmul``/``linear``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels._args import ints, text
from nebisect.mil.kernels._spatial import effective_kernel, resolve_pads
from nebisect.mil.kernels.linalg import naive_matmul

Matmul = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _spatial_params(
    spatial: int, strides: Any, dilations: Any, groups: Any
) -> tuple[list[int], list[int], int]:
    return (
        ints(strides) or [1] * spatial,
        ints(dilations) or [1] * spatial,
        int(np.asarray(groups).item()) if groups is not None else 1,
    )


def _at(tap: tuple[int, ...]) -> tuple[Any, ...]:
    """Index of one kernel tap in a weight whose trailing dims are the kernel's."""
    return (Ellipsis, *tap)


def _add_bias(out: np.ndarray, bias: Any) -> np.ndarray:
    if bias is None:
        return out
    b = np.asarray(bias)
    return out + b.reshape((-1,) + (1,) * (out.ndim - 2))


def _conv(
    matmul: Matmul, x: Any, weight: Any, bias: Any, strides: Any, pad_type: Any, pad: Any,
    dilations: Any, groups: Any,
) -> np.ndarray:
    x, weight = np.asarray(x), np.asarray(weight)
    spatial = x.ndim - 2
    stride, dilation, g = _spatial_params(spatial, strides, dilations, groups)
    taps = weight.shape[2:]
    pads = resolve_pads(
        text(pad_type, "valid"), x.shape[2:], taps, stride, dilation, ints(pad) or [0] * 2 * spatial
    )
    xp = np.pad(x, [(0, 0), (0, 0), *pads])
    eff = effective_kernel(taps, dilation)
    out_dims = [(xp.shape[2 + i] - eff[i]) // stride[i] + 1 for i in range(spatial)]
    n, c_in = x.shape[:2]
    c_out = weight.shape[0]
    w = weight.reshape(g, c_out // g, c_in // g, *taps)
    out = np.zeros((n, g, c_out // g, int(np.prod(out_dims))), dtype=np.result_type(x, weight))
    for tap in itertools.product(*(range(k) for k in taps)):
        window = tuple(
            slice(t * d, t * d + (o - 1) * s + 1, s)
            for t, d, o, s in zip(tap, dilation, out_dims, stride, strict=True)
        )
        patch = xp[(slice(None), slice(None), *window)].reshape(n, g, c_in // g, -1)
        out += matmul(w[_at(tap)], patch)
    return _add_bias(out.reshape(n, c_out, *out_dims), bias)


def _conv_kernel(matmul: Matmul) -> Callable[..., np.ndarray]:
    """The ``conv`` kernel doing its per-tap products with ``matmul``."""

    def conv(
        ctx: KernelContext,
        x: np.ndarray,
        weight: np.ndarray,
        bias: Any = None,
        strides: Any = None,
        pad_type: Any = "valid",
        pad: Any = None,
        dilations: Any = None,
        groups: Any = 1,
    ) -> np.ndarray:
        return _conv(matmul, x, weight, bias, strides, pad_type, pad, dilations, groups)

    return conv


conv = kernel("conv")(_conv_kernel(np.matmul))
conv_naive = kernel("conv", variant="naive")(_conv_kernel(naive_matmul))


def _transpose_pads(
    pad_type: str, in_dims: list[int], eff: list[int], stride: list[int], pad: list[int],
    out_dims: list[int] | None,
) -> tuple[list[int], list[int]]:
    """(crop before, output length) per spatial dim of a transposed convolution."""
    full = [(d - 1) * s + k for d, s, k in zip(in_dims, stride, eff, strict=True)]
    befores, lengths = [], []
    for i, length in enumerate(full):
        if pad_type == "custom":
            before, natural = pad[2 * i], length - pad[2 * i] - pad[2 * i + 1]
        elif pad_type in ("same", "same_lower"):
            natural = in_dims[i] * stride[i]
            total = max(0, length - natural)
            before = total // 2 if pad_type == "same" else total - total // 2
        else:
            before, natural = 0, length
        befores.append(before)
        lengths.append(out_dims[i] if out_dims is not None else natural)
    return befores, lengths


def _conv_transpose(
    matmul: Matmul, x: Any, weight: Any, bias: Any, pad: Any, output_shape: Any,
    pad_type: Any, strides: Any, dilations: Any, groups: Any,
) -> np.ndarray:
    """Scatter each input position's ``x @ W[tap]`` to ``p*s + tap*d``, then crop."""
    x, weight = np.asarray(x), np.asarray(weight)
    spatial = x.ndim - 2
    stride, dilation, g = _spatial_params(spatial, strides, dilations, groups)
    taps = weight.shape[2:]
    n, c_in = x.shape[:2]
    c_out = weight.shape[1] * g
    in_dims = list(x.shape[2:])
    eff = effective_kernel(taps, dilation)
    requested = ints(output_shape)[2:] if output_shape is not None else None
    befores, lengths = _transpose_pads(
        text(pad_type, "valid"), in_dims, eff, stride, ints(pad) or [0] * 2 * spatial,
        requested or None,
    )
    full = [max((d - 1) * s + k, b + n_out) for d, s, k, b, n_out in
            zip(in_dims, stride, eff, befores, lengths, strict=True)]
    out = np.zeros((n, g, c_out // g, *full), dtype=np.result_type(x, weight))
    w = np.moveaxis(weight.reshape(g, c_in // g, c_out // g, *taps), 1, 2)
    xs = x.reshape(n, g, c_in // g, -1)
    for tap in itertools.product(*(range(k) for k in taps)):
        contrib = matmul(w[_at(tap)], xs).reshape(n, g, c_out // g, *in_dims)
        window = tuple(
            slice(t * dl, t * dl + (d - 1) * s + 1, s)
            for t, dl, d, s in zip(tap, dilation, in_dims, stride, strict=True)
        )
        out[(slice(None), slice(None), slice(None), *window)] += contrib
    crop = tuple(slice(b, b + length) for b, length in zip(befores, lengths, strict=True))
    cropped = out[(slice(None), slice(None), slice(None), *crop)]
    return _add_bias(cropped.reshape(n, c_out, *lengths), bias)


def _conv_transpose_kernel(matmul: Matmul) -> Callable[..., np.ndarray]:
    """The ``conv_transpose`` kernel doing its per-tap products with ``matmul``."""

    def conv_transpose(
        ctx: KernelContext,
        x: np.ndarray,
        weight: np.ndarray,
        bias: Any = None,
        pad: Any = None,
        output_shape: Any = None,
        pad_type: Any = "valid",
        strides: Any = None,
        dilations: Any = None,
        groups: Any = 1,
    ) -> np.ndarray:
        return _conv_transpose(
            matmul, x, weight, bias, pad, output_shape, pad_type, strides, dilations, groups
        )

    return conv_transpose


conv_transpose = kernel("conv_transpose")(_conv_transpose_kernel(np.matmul))
conv_transpose_naive = kernel("conv_transpose", variant="naive")(
    _conv_transpose_kernel(naive_matmul)
)

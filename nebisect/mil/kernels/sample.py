"""Grid sampling kernels: ``resample`` and ``affine`` (PyTorch's ``grid_sample`` /
``affine_grid``, which the torch frontend lowers to them).

Coordinates are ``(x, y)`` pairs mapped to pixel space by ``coordinates_mode`` and
``align_corners``; ``padding_mode`` ``border`` clamps, ``reflection`` mirrors about the
edge pixel centres, ``symmetric`` about the image edges (PyTorch's reflection without
``align_corners``), and ``constant`` gives out-of-image taps ``padding_value``.
Nearest sampling rounds half to even, like PyTorch's ``nearbyint``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.errors import NebisectError
from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels._args import flag, scalar, text


def _to_pixels(coord: np.ndarray, size: int, mode: str, align: bool) -> np.ndarray:
    if mode == "unnormalized":
        return coord
    if mode == "normalized_minus_one_to_one":
        return (coord + 1) / 2 * (size - 1) if align else ((coord + 1) * size - 1) / 2
    if mode == "normalized_zero_to_one":
        return coord * (size - 1) if align else coord * size - 0.5
    raise NebisectError(f"unknown coordinates_mode {mode!r}")


def _reflect(pos: np.ndarray, low: float, high: float) -> np.ndarray:
    span = high - low
    if span <= 0:
        return np.zeros_like(pos)
    dist = np.abs(pos - low)
    flips = np.floor(dist / span)
    extra = np.mod(dist, span)
    return np.where(flips % 2 == 0, low + extra, high - extra)


def _pad_coords(pos: np.ndarray, size: int, padding: str) -> np.ndarray:
    if padding == "border":
        return np.clip(pos, 0, size - 1)
    if padding == "reflection":
        return np.clip(_reflect(pos, 0.0, size - 1.0), 0, size - 1)
    if padding == "symmetric":
        return np.clip(_reflect(pos, -0.5, size - 0.5), 0, size - 1)
    if padding == "constant":
        return pos
    raise NebisectError(f"unknown padding_mode {padding!r}")


def _taps(image: np.ndarray, rows: np.ndarray, cols: np.ndarray, fill: float) -> np.ndarray:
    """image[:, rows, cols] with ``fill`` where (rows, cols) is outside: [C, *grid]."""
    height, width = image.shape[-2:]
    inside = (rows >= 0) & (rows < height) & (cols >= 0) & (cols < width)
    values = image[:, np.clip(rows, 0, height - 1), np.clip(cols, 0, width - 1)]
    return np.where(inside, values, image.dtype.type(fill))


def grid_sample(
    x: np.ndarray, coordinates: np.ndarray, sampling: str, padding: str, fill: float,
    coord_mode: str, align: bool,
) -> np.ndarray:
    """Sample [B, C, H, W] at [B, Ho, Wo, 2] (x, y) coordinates → [B, C, Ho, Wo]."""
    height, width = x.shape[-2:]
    coords = np.asarray(coordinates, dtype=np.float64)
    px = _pad_coords(_to_pixels(coords[..., 0], width, coord_mode, align), width, padding)
    py = _pad_coords(_to_pixels(coords[..., 1], height, coord_mode, align), height, padding)
    out = []
    for b in range(x.shape[0]):
        if sampling == "nearest":
            rows, cols = np.rint(py[b]).astype(np.int64), np.rint(px[b]).astype(np.int64)
            out.append(_taps(x[b], rows, cols, fill))
            continue
        if sampling != "bilinear":
            raise NebisectError(f"unknown sampling_mode {sampling!r}")
        x0, y0 = np.floor(px[b]), np.floor(py[b])
        wx, wy = (px[b] - x0).astype(x.dtype), (py[b] - y0).astype(x.dtype)
        x0, y0 = x0.astype(np.int64), y0.astype(np.int64)
        top = _taps(x[b], y0, x0, fill) * (1 - wx) + _taps(x[b], y0, x0 + 1, fill) * wx
        bottom = _taps(x[b], y0 + 1, x0, fill) * (1 - wx) + _taps(x[b], y0 + 1, x0 + 1, fill) * wx
        out.append(top * (1 - wy) + bottom * wy)
    return np.stack(out)


@kernel("resample")
def resample(
    ctx: KernelContext,
    x: np.ndarray,
    coordinates: Any,
    sampling_mode: Any,
    padding_mode: Any,
    padding_value: Any,
    coordinates_mode: Any,
    align_corners: Any,
) -> np.ndarray:
    return grid_sample(
        np.asarray(x), np.asarray(coordinates), text(sampling_mode).lower(),
        text(padding_mode).lower(), scalar(padding_value, 0.0), text(coordinates_mode),
        flag(align_corners),
    )


@kernel("affine")
def affine(
    ctx: KernelContext,
    x: np.ndarray,
    transform_matrix: Any,
    output_height: Any,
    output_width: Any,
    sampling_mode: Any,
    padding_mode: Any,
    padding_value: Any,
    coordinates_mode: Any,
    align_corners: Any,
) -> np.ndarray:
    """Sample at ``(a0 x + a1 y + a2, b0 x + b1 y + b2)`` over a normalized output grid."""
    x = np.asarray(x)
    align = flag(align_corners)
    height, width = int(np.asarray(output_height)), int(np.asarray(output_width))

    def base(size: int) -> np.ndarray:
        if align:
            return np.linspace(-1.0, 1.0, size) if size > 1 else np.zeros(1)
        return (2 * np.arange(size) + 1) / size - 1

    gx, gy = np.meshgrid(base(width), base(height))
    theta = np.asarray(transform_matrix, dtype=np.float64).reshape(-1, 6)
    theta = np.broadcast_to(theta, (x.shape[0], 6))
    grid = np.stack(
        [
            np.stack([t[0] * gx + t[1] * gy + t[2], t[3] * gx + t[4] * gy + t[5]], axis=-1)
            for t in theta
        ]
    )
    return grid_sample(
        x, grid, text(sampling_mode).lower(), text(padding_mode).lower(),
        scalar(padding_value, 0.0), text(coordinates_mode), align,
    )

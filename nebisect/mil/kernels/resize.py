"""Image resizing kernels: upsample/resize (nearest and bilinear), iOS17 ``resize``,
``crop`` and ``crop_resize``.

Bilinear sampling positions follow the ``sampling_mode`` table of coremltools'
``resize_bilinear`` docstring (grid over ``[0, in-1]``, clamped); ``upsample_bilinear``
maps ``align_corners`` / ``half_pixel_centers`` onto it (STRICT_ALIGN_CORNERS,
UNALIGN_CORNERS, DEFAULT). Nearest neighbour picks ``floor(i * in / out)`` (PyTorch's
legacy ``nearest``, also for fractional scales), except iOS17 ``resize`` which rounds
its sampling grid. ``crop_resize`` samples each box like TensorFlow's
``crop_and_resize``: points outside the image take ``pad_value``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.errors import NebisectError
from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels._args import flag, ints, scalar, text


def sampling_grid(size_in: int, size_out: int, mode: str) -> np.ndarray:
    """Sample positions in input pixel coordinates for one spatial dim."""
    i = np.arange(size_out, dtype=np.float64)
    if mode in ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS"):
        if size_out == 1:
            pos = np.full(1, (size_in - 1) / 2 if mode == "ALIGN_CORNERS" else 0.0)
        else:
            pos = i * (size_in - 1) / (size_out - 1)
    elif mode == "DEFAULT":
        pos = i * size_in / size_out
    elif mode == "OFFSET_CORNERS":
        delta = max(1, size_in - 1) / size_out
        pos = 0.5 * delta + i * delta
    elif mode == "UNALIGN_CORNERS":
        spacing = size_in / size_out
        pos = i * spacing + 0.5 * spacing - 0.5
    else:
        raise NebisectError(f"unknown sampling_mode {mode!r}")
    return np.clip(pos, 0, size_in - 1)


def _linear(x: np.ndarray, axis: int, pos: np.ndarray) -> np.ndarray:
    """Linear interpolation of ``x`` along ``axis`` at fractional positions ``pos``."""
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, x.shape[axis] - 1)
    shape = [1] * x.ndim
    shape[axis] = pos.size
    w = (pos - lo).reshape(shape).astype(x.dtype)
    return np.take(x, lo, axis=axis) * (1 - w) + np.take(x, hi, axis=axis) * w


def _nearest(x: np.ndarray, axis: int, size_out: int) -> np.ndarray:
    size_in = x.shape[axis]
    index = np.minimum(np.arange(size_out) * size_in // size_out, size_in - 1)
    return np.take(x, index, axis=axis)


def _out_size(size_in: int, scale: Any) -> int:
    return int(np.floor(size_in * scalar(scale, 1.0)))


@kernel("upsample_nearest_neighbor")
def upsample_nearest_neighbor(
    ctx: KernelContext, x: np.ndarray, scale_factor_height: Any = 1, scale_factor_width: Any = 1
) -> np.ndarray:
    x = np.asarray(x)
    out = _nearest(x, -2 % x.ndim, _out_size(x.shape[-2], scale_factor_height))
    return _nearest(out, x.ndim - 1, _out_size(x.shape[-1], scale_factor_width))


@kernel("resize_nearest_neighbor")
def resize_nearest_neighbor(
    ctx: KernelContext, x: np.ndarray, target_size_height: Any, target_size_width: Any
) -> np.ndarray:
    x = np.asarray(x)
    out = _nearest(x, x.ndim - 2, int(np.asarray(target_size_height)))
    return _nearest(out, x.ndim - 1, int(np.asarray(target_size_width)))


def _bilinear(x: np.ndarray, height: int, width: int, mode: str) -> np.ndarray:
    out = _linear(x, x.ndim - 2, sampling_grid(x.shape[-2], height, mode))
    return _linear(out, x.ndim - 1, sampling_grid(x.shape[-1], width, mode))


@kernel("upsample_bilinear")
def upsample_bilinear(
    ctx: KernelContext,
    x: np.ndarray,
    scale_factor_height: Any = 1,
    scale_factor_width: Any = 1,
    align_corners: Any = True,
    half_pixel_centers: Any = None,
) -> np.ndarray:
    x = np.asarray(x)
    aligned = flag(align_corners, True)
    half_pixel = flag(half_pixel_centers, not aligned)
    mode = "STRICT_ALIGN_CORNERS" if aligned else "UNALIGN_CORNERS" if half_pixel else "DEFAULT"
    return _bilinear(x, _out_size(x.shape[-2], scale_factor_height),
                     _out_size(x.shape[-1], scale_factor_width), mode)


@kernel("resize_bilinear")
def resize_bilinear(
    ctx: KernelContext,
    x: np.ndarray,
    target_size_height: Any = 1,
    target_size_width: Any = 1,
    sampling_mode: Any = "DEFAULT",
) -> np.ndarray:
    return _bilinear(np.asarray(x), int(np.asarray(target_size_height)),
                     int(np.asarray(target_size_width)), text(sampling_mode, "DEFAULT"))


@kernel("resize")
def resize(
    ctx: KernelContext,
    x: np.ndarray,
    shape: Any,
    resized_dims: Any,
    interpolation_mode: Any = "LINEAR",
    sampling_mode: Any = "DEFAULT",
) -> np.ndarray:
    """Resize the last ``resized_dims`` dims to the tail of ``shape`` (0 keeps a dim)."""
    out = np.asarray(x)
    count = int(np.asarray(resized_dims))
    sizes = ints(shape)[len(ints(shape)) - count :]
    mode = text(sampling_mode, "DEFAULT")
    linear = text(interpolation_mode, "LINEAR") == "LINEAR"
    for offset, size in enumerate(sizes):
        axis = out.ndim - count + offset
        size = size or out.shape[axis]
        pos = sampling_grid(out.shape[axis], size, mode)
        if linear:
            out = _linear(out, axis, pos)
        else:
            index = np.minimum(np.floor(pos + 0.5).astype(np.int64), out.shape[axis] - 1)
            out = np.take(out, index, axis=axis)
    return out


@kernel("crop")
def crop(ctx: KernelContext, x: np.ndarray, crop_height: Any, crop_width: Any) -> np.ndarray:
    x = np.asarray(x)
    top, bottom = ints(crop_height)
    left, right = ints(crop_width)
    return x[..., top : x.shape[-2] - bottom, left : x.shape[-1] - right]


def _box_corners(box: np.ndarray, mode: str) -> tuple[float, float, float, float]:
    """(h_start, w_start, h_end, w_end) of one box in any coordinate mode."""
    a, b, c, d = (float(v) for v in box)
    if mode == "CORNERS_HEIGHT_FIRST":
        return a, b, c, d
    if mode == "CORNERS_WIDTH_FIRST":
        return b, a, d, c
    if mode == "CENTER_SIZE_HEIGHT_FIRST":
        return a - c / 2, b - d / 2, a + c / 2, b + d / 2
    if mode == "CENTER_SIZE_WIDTH_FIRST":
        return b - d / 2, a - c / 2, b + d / 2, a + c / 2
    raise NebisectError(f"unknown box_coordinate_mode {mode!r}")


def _box_grid(start: float, end: float, size_out: int, mode: str) -> np.ndarray:
    """Sample positions across a box ``[start, end]`` (pixel coordinates).

    The ALIGN modes hit both ends (TensorFlow's ``crop_and_resize``; a single sample
    takes the centre, STRICT its start); the others apply ``resize_bilinear``'s spacing
    rules with the box length in place of the input size.
    """
    i = np.arange(size_out, dtype=np.float64)
    if size_out == 1:
        return np.array([(start + end) / 2 if mode != "STRICT_ALIGN_CORNERS" else start])
    if mode in ("STRICT_ALIGN_CORNERS", "ALIGN_CORNERS"):
        return start + i * (end - start) / (size_out - 1)
    spacing = (end - start) / size_out
    if mode == "DEFAULT":
        return start + i * spacing
    if mode == "OFFSET_CORNERS":
        return start + (i + 0.5) * spacing
    return start + (i + 0.5) * spacing - 0.5


def _sample_box(
    image: np.ndarray, rows: np.ndarray, cols: np.ndarray, pad_value: float
) -> np.ndarray:
    """Bilinear samples of a [C, H, W] image on the rows x cols grid; outside → pad."""
    height, width = image.shape[-2:]
    inside_r = (rows >= 0) & (rows <= height - 1)
    inside_c = (cols >= 0) & (cols <= width - 1)
    sampled = _linear(_linear(image, 1, np.clip(rows, 0, height - 1)), 2,
                      np.clip(cols, 0, width - 1))
    keep = inside_r[:, None] & inside_c[None, :]
    return np.where(keep, sampled, image.dtype.type(pad_value))


@kernel("crop_resize")
def crop_resize(
    ctx: KernelContext,
    x: np.ndarray,
    roi: Any = None,
    boxes: Any = None,
    box_indices: Any = None,
    target_height: Any = 1,
    target_width: Any = 1,
    normalized_coordinates: Any = False,
    spatial_scale: Any = 1.0,
    box_coordinate_mode: Any = "CORNERS_HEIGHT_FIRST",
    sampling_mode: Any = "DEFAULT",
    pad_value: Any = 0.0,
) -> np.ndarray:
    """iOS15/16 ``roi`` [N,1,4|5,1,1] → [N, B|1, C, h, w]; iOS17 ``boxes`` → [N, C, h, w]."""
    x = np.asarray(x)
    height, width = x.shape[-2:]
    if boxes is not None:
        coords = np.asarray(boxes, dtype=np.float64).reshape(-1, 4)
        images = ints(box_indices) or list(range(coords.shape[0]))
        per_box = [[i] for i in images]
    else:
        flat = np.asarray(roi, dtype=np.float64).reshape(np.shape(roi)[0], -1)
        coords = flat[:, -4:]
        per_box = (
            [[int(i)] for i in flat[:, 0]] if flat.shape[1] == 5
            else [list(range(x.shape[0]))] * flat.shape[0]
        )
    th, tw = int(np.asarray(target_height)), int(np.asarray(target_width))
    mode, scale = text(sampling_mode, "DEFAULT"), scalar(spatial_scale, 1.0)
    pad = scalar(pad_value, 0.0)
    crops = []
    for box, images in zip(coords, per_box, strict=True):
        h0, w0, h1, w1 = _box_corners(box, text(box_coordinate_mode, "CORNERS_HEIGHT_FIRST"))
        hs, ws = (height - 1, width - 1) if flag(normalized_coordinates) else (1, 1)
        rows = _box_grid(h0 * hs * scale, h1 * hs * scale, th, mode)
        cols = _box_grid(w0 * ws * scale, w1 * ws * scale, tw, mode)
        crops.append([_sample_box(x[b], rows, cols, pad) for b in images])
    out = np.asarray(crops, dtype=x.dtype)
    return out[:, 0] if boxes is not None else out

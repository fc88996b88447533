"""Runtime affine quantization kernels (iOS17 ``quantize`` / ``dequantize``).

``quantize`` is ``clip(round_half_even(x / scale) + zero_point)`` into the int8/uint8
range, ``dequantize`` is ``scale * (x - zero_point)``; a vector scale/zero point applies
along ``axis`` — coremltools' ``quantize_by_scale_and_zp`` and its inverse.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels._args import text
from nebisect.mil.kernels.constexpr import along_axis


@kernel("quantize")
def quantize(
    ctx: KernelContext,
    input: Any,
    scale: Any,
    output_dtype: Any,
    zero_point: Any = None,
    axis: Any = None,
) -> np.ndarray:
    x = np.asarray(input)
    dtype = np.dtype(text(output_dtype))
    q = np.around(x / along_axis(scale, x.ndim, axis).astype(x.dtype))
    if zero_point is not None:
        q = q + along_axis(zero_point, x.ndim, axis).astype(x.dtype)
    info = np.iinfo(dtype)
    return np.clip(q, info.min, info.max).astype(dtype)


@kernel("dequantize")
def dequantize(
    ctx: KernelContext,
    input: Any,
    scale: Any,
    zero_point: Any = None,
    axis: Any = None,
) -> np.ndarray:
    x = np.asarray(input).astype(ctx.dtype)
    if zero_point is not None:
        x = x - along_axis(zero_point, x.ndim, axis).astype(ctx.dtype)
    return x * along_axis(scale, x.ndim, axis).astype(ctx.dtype)

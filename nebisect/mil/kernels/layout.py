"""Channel/space/batch rearrangements of NCHW tensors.

``depth_to_space``/``space_to_depth`` use TensorFlow's DCR order (channel index
``(i * bs + j) * C + c``); ``pixel_shuffle``/``pixel_unshuffle`` use PyTorch's CRD order
(``c * f * f + i * f + j``); ``space_to_batch``/``batch_to_space`` follow TensorFlow with
batch index ``(i * bw + j) * n + b`` — the conventions of the frontends that emit them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels._args import ints


def _int(value: Any) -> int:
    return int(np.asarray(value).item())


@kernel("depth_to_space")
def depth_to_space(ctx: KernelContext, x: np.ndarray, block_size: Any) -> np.ndarray:
    n, c, h, w = np.shape(x)
    bs = _int(block_size)
    blocks = np.reshape(x, (n, bs, bs, c // (bs * bs), h, w))
    return blocks.transpose(0, 3, 4, 1, 5, 2).reshape(n, c // (bs * bs), h * bs, w * bs)


@kernel("space_to_depth")
def space_to_depth(ctx: KernelContext, x: np.ndarray, block_size: Any) -> np.ndarray:
    n, c, h, w = np.shape(x)
    bs = _int(block_size)
    blocks = np.reshape(x, (n, c, h // bs, bs, w // bs, bs))
    return blocks.transpose(0, 3, 5, 1, 2, 4).reshape(n, c * bs * bs, h // bs, w // bs)


@kernel("pixel_shuffle")
def pixel_shuffle(ctx: KernelContext, x: np.ndarray, upscale_factor: Any) -> np.ndarray:
    n, c, h, w = np.shape(x)
    f = _int(upscale_factor)
    blocks = np.reshape(x, (n, c // (f * f), f, f, h, w))
    return blocks.transpose(0, 1, 4, 2, 5, 3).reshape(n, c // (f * f), h * f, w * f)


@kernel("pixel_unshuffle")
def pixel_unshuffle(ctx: KernelContext, x: np.ndarray, downscale_factor: Any) -> np.ndarray:
    n, c, h, w = np.shape(x)
    f = _int(downscale_factor)
    blocks = np.reshape(x, (n, c, h // f, f, w // f, f))
    return blocks.transpose(0, 1, 3, 5, 2, 4).reshape(n, c * f * f, h // f, w // f)


@kernel("space_to_batch")
def space_to_batch(
    ctx: KernelContext, x: np.ndarray, block_shape: Any, paddings: Any
) -> np.ndarray:
    bh, bw = ints(block_shape)
    (top, bottom), (left, right) = np.asarray(paddings).reshape(2, 2).tolist()
    padded = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)))
    n, c, h, w = padded.shape
    blocks = padded.reshape(n, c, h // bh, bh, w // bw, bw)
    return blocks.transpose(3, 5, 0, 1, 2, 4).reshape(bh * bw * n, c, h // bh, w // bw)


@kernel("batch_to_space")
def batch_to_space(ctx: KernelContext, x: np.ndarray, block_shape: Any, crops: Any) -> np.ndarray:
    bh, bw = ints(block_shape)
    (top, bottom), (left, right) = np.asarray(crops).reshape(2, 2).tolist()
    nb, c, h, w = np.shape(x)
    n = nb // (bh * bw)
    blocks = np.reshape(x, (bh, bw, n, c, h, w)).transpose(2, 3, 4, 0, 5, 1)
    full = blocks.reshape(n, c, h * bh, w * bw)
    return full[:, :, top : h * bh - bottom, left : w * bw - right]

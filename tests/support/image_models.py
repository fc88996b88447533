"""A ConvNeXt-style stem: a 4×4 patchifying conv, then LayerNorm over the channels.

At a constant image of ±6e-8 (the ``tiny`` family) the conv's outputs underflow fp16 and
the LayerNorm divides their (zero) spread by its epsilon: a precision failure in fp16 —
but no ImageNet-normalized 8-bit image is that close to zero (its levels nearest zero are
0.0056, -0.0049 and 0.0082). Declared as a range (``--input-range
pixel_values=-2.118:2.64``), the fill is inside it; declared as an image
(:func:`imagenet`), exploration never feeds it.
"""

from __future__ import annotations

from typing import Any

import torch

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
SIDE = 16
#: ImageNet's normalization as a domain: ``--input-range pixel_values=…`` or a factory's
IMAGENET = "image:0.485,0.456,0.406/0.229,0.224,0.225"


class Stem(torch.nn.Module):
    """ConvNeXt's patch embedding: conv 4×4 stride 4, LayerNorm over channels,
    initialized as transformers initializes it (weights of std 0.02, no bias)."""

    def __init__(self) -> None:
        super().__init__()
        self.patchify = torch.nn.Conv2d(3, 16, kernel_size=4, stride=4)
        self.norm = torch.nn.LayerNorm(16, eps=1e-6)
        with torch.no_grad():
            self.patchify.weight.normal_(0.0, 0.02)
            self.patchify.bias.zero_()

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        patches = self.patchify(pixel_values).permute(0, 2, 3, 1)
        return self.norm(patches).permute(0, 3, 1, 2)


def _levels() -> torch.Tensor:
    """A random 8-bit image, normalized as an ImageNet image processor does."""
    pixels = torch.randint(0, 256, (1, 3, SIDE, SIDE),
                           generator=torch.Generator().manual_seed(0)) / 255
    mean, std = (torch.tensor(v).view(1, 3, 1, 1) for v in (MEAN, STD))
    return (pixels - mean) / std


def model() -> dict[str, Any]:
    """The stem on an 8-bit image; no domain declared (``--input-range`` declares one)."""
    torch.manual_seed(0)
    return {"module": Stem(), "example_inputs": {"pixel_values": _levels()}}


def imagenet() -> dict[str, Any]:
    """The stem, its input declared an ImageNet-normalized 8-bit image."""
    return {**model(), "input_domains": {"pixel_values": IMAGENET}}

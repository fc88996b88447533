"""ConvNeXt (ConvNextForImageClassification), tiny random-init: two stages."""

from __future__ import annotations

from typing import Any

from _common import IMAGENET_NORM, Vision, image_source, seeded, tiny
from transformers import ConvNextConfig, ConvNextForImageClassification


def model() -> dict[str, Any]:
    seeded()
    config = tiny(ConvNextConfig, attention=None, num_stages=2, patch_size=4,
                  hidden_sizes=[16, 32], depths=[1, 1], num_labels=10)
    return image_source(Vision(ConvNextForImageClassification(config)), IMAGENET_NORM)

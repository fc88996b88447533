"""Swin (SwinForImageClassification), tiny random-init: 4x4 windows, two stages."""

from __future__ import annotations

from typing import Any

from _common import IMAGE, IMAGENET_NORM, Vision, image_source, seeded, tiny
from transformers import SwinConfig, SwinForImageClassification


def model() -> dict[str, Any]:
    seeded()
    config = tiny(SwinConfig, image_size=IMAGE, patch_size=4, embed_dim=16, depths=[1, 1],
                  num_heads=[2, 2], window_size=4, num_labels=10)
    return image_source(Vision(SwinForImageClassification(config)), IMAGENET_NORM)

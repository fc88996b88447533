"""ResNet (ResNetForImageClassification), tiny random-init: two basic-block stages."""

from __future__ import annotations

from typing import Any

from _common import IMAGENET_NORM, Vision, image_source, seeded, tiny
from transformers import ResNetConfig, ResNetForImageClassification


def model() -> dict[str, Any]:
    seeded()
    config = tiny(ResNetConfig, attention=None, embedding_size=16, hidden_sizes=[16, 32],
                  depths=[1, 1], layer_type="basic", num_labels=10)
    return image_source(Vision(ResNetForImageClassification(config)), IMAGENET_NORM)

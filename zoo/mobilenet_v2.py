"""MobileNetV2 (MobileNetV2ForImageClassification), random-init at depth multiplier 0.35."""

from __future__ import annotations

from typing import Any

from _common import HALF_NORM, IMAGE, Vision, image_source, seeded, tiny
from transformers import MobileNetV2Config, MobileNetV2ForImageClassification


def model() -> dict[str, Any]:
    seeded()
    config = tiny(MobileNetV2Config, image_size=IMAGE, depth_multiplier=0.35, num_labels=10)
    return image_source(Vision(MobileNetV2ForImageClassification(config)), HALF_NORM)

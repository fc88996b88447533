"""MobileNetV2 (MobileNetV2ForImageClassification), random-init at depth multiplier 0.35."""

from __future__ import annotations

from typing import Any

import torch
from _common import HALF_NORM, IMAGE, Vision, image_source, seeded, tiny
from transformers import MobileNetV2Config, MobileNetV2ForImageClassification


def model() -> dict[str, Any]:
    seeded()
    config = tiny(MobileNetV2Config, attention=None, image_size=IMAGE, depth_multiplier=0.35,
                  num_labels=10)
    network = MobileNetV2ForImageClassification(config)
    # HF's normal(0.02) init shrinks the activations through 52 convolutions to ~1e-25
    # (fp16 flushes the logits to 0); He init keeps them O(1), as trained weights do.
    for layer in network.modules():
        if isinstance(layer, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(layer.weight, mode="fan_in")
    return image_source(Vision(network), HALF_NORM)

"""ViT (ViTForImageClassification), tiny random-init, 32x32 images in 8x8 patches."""

from __future__ import annotations

from typing import Any

from _common import HALF_NORM, IMAGE, Vision, image_source, seeded, tiny
from transformers import ViTConfig, ViTForImageClassification


def model() -> dict[str, Any]:
    seeded()
    config = tiny(ViTConfig, image_size=IMAGE, patch_size=8, hidden_size=32,
                  num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                  num_labels=10)
    return image_source(Vision(ViTForImageClassification(config)), HALF_NORM)

"""CLIP vision tower (CLIPVisionModel), tiny random-init, 32x32 images in 8x8 patches."""

from __future__ import annotations

from typing import Any

from _common import CLIP_NORM, IMAGE, Vision, image_source, seeded, tiny
from transformers import CLIPVisionConfig, CLIPVisionModel


def model() -> dict[str, Any]:
    seeded()
    config = tiny(CLIPVisionConfig, image_size=IMAGE, patch_size=8, hidden_size=32,
                  intermediate_size=64, num_hidden_layers=2, num_attention_heads=2)
    module = Vision(CLIPVisionModel(config), ("last_hidden_state", "pooler_output"))
    return image_source(module, CLIP_NORM)

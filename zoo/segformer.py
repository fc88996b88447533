"""SegFormer (SegformerForSemanticSegmentation), tiny random-init; logits at 1/4 resolution."""

from __future__ import annotations

from typing import Any

from _common import IMAGENET_NORM, Vision, image_source, seeded, tiny
from transformers import SegformerConfig, SegformerForSemanticSegmentation


def model() -> dict[str, Any]:
    seeded()
    config = tiny(SegformerConfig, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                  hidden_sizes=[16, 32], patch_sizes=[7, 3], strides=[4, 2],
                  num_attention_heads=[1, 2], mlp_ratios=[2, 2], decoder_hidden_size=32,
                  num_labels=4)
    return image_source(Vision(SegformerForSemanticSegmentation(config)), IMAGENET_NORM)

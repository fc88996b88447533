"""CLIP text tower (CLIPTextModel), tiny random-init: causal mask, pooled at the largest id."""

from __future__ import annotations

from typing import Any

from _common import VOCAB, Text, seeded, text_source, tiny
from transformers import CLIPTextConfig, CLIPTextModel


def model() -> dict[str, Any]:
    seeded()
    # eos_token_id 2 selects CLIP's original pooling: the position of the largest id (EOS).
    config = tiny(CLIPTextConfig, vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                  num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=16,
                  bos_token_id=VOCAB - 2, eos_token_id=2)
    module = Text(CLIPTextModel(config), ("last_hidden_state", "pooler_output"))
    return text_source(module, VOCAB)

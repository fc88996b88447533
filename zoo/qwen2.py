"""Qwen2 (Qwen2ForCausalLM), tiny random-init with grouped-query attention; logits."""

from __future__ import annotations

from typing import Any

from _common import VOCAB, CausalLM, seeded, text_source, tiny
from transformers import Qwen2Config, Qwen2ForCausalLM


def model() -> dict[str, Any]:
    seeded()
    config = tiny(Qwen2Config, vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=64)
    module = CausalLM(Qwen2ForCausalLM(config))
    return text_source(module, VOCAB, ("logits",))

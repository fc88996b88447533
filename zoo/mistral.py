"""Mistral (MistralForCausalLM), tiny random-init; a sliding window of 8 inside the 16 tokens."""

from __future__ import annotations

from typing import Any

from _common import VOCAB, CausalLM, seeded, text_source, tiny
from transformers import MistralConfig, MistralForCausalLM


def model() -> dict[str, Any]:
    seeded()
    config = tiny(MistralConfig, vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=64, sliding_window=8)
    module = CausalLM(MistralForCausalLM(config))
    return text_source(module, VOCAB, ("logits",))

"""Phi (PhiForCausalLM), tiny random-init with partial rotary embeddings; logits."""

from __future__ import annotations

from typing import Any

from _common import VOCAB, CausalLM, seeded, text_source, tiny
from transformers import PhiConfig, PhiForCausalLM


def model() -> dict[str, Any]:
    seeded()
    config = tiny(PhiConfig, vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                  num_hidden_layers=2, num_attention_heads=2, max_position_embeddings=64,
                  partial_rotary_factor=0.5)
    module = CausalLM(PhiForCausalLM(config))
    return text_source(module, VOCAB, ("logits",))

"""LLaMA (LlamaForCausalLM), tiny random-init with grouped-query attention; logits.

Called through LlamaForCausalLM's own forward, whose ``logits_to_keep`` slice
(``hidden_states[:, -0:]``) exports as ``aten.alias``, which coremltools 9.0 cannot
convert at its defaults (nebisect's converter overrides cure it); the other decoders go
through their base model and LM head (``CausalLM``).
"""

from __future__ import annotations

from typing import Any

from _common import VOCAB, Text, seeded, text_source, tiny
from transformers import LlamaConfig, LlamaForCausalLM


def model() -> dict[str, Any]:
    seeded()
    config = tiny(LlamaConfig, vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=64)
    module = Text(LlamaForCausalLM(config), ("logits",), decoder=True)
    return text_source(module, VOCAB, ("logits",))

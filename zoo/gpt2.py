"""GPT-2 (GPT2LMHeadModel), tiny random-init; logits over the sequence."""

from __future__ import annotations

from typing import Any

from _common import VOCAB, CausalLM, seeded, text_source, tiny
from transformers import GPT2Config, GPT2LMHeadModel


def model() -> dict[str, Any]:
    seeded()
    config = tiny(GPT2Config, vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                  bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1)
    module = CausalLM(GPT2LMHeadModel(config))
    return text_source(module, VOCAB, ("logits",))

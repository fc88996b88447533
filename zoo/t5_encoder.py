"""T5 encoder (T5EncoderModel), tiny random-init with relative position buckets."""

from __future__ import annotations

from typing import Any

from _common import VOCAB, Text, seeded, text_source, tiny
from transformers import T5Config, T5EncoderModel


def model() -> dict[str, Any]:
    seeded()
    config = tiny(T5Config, vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2,
                  num_heads=2, relative_attention_num_buckets=8,
                  relative_attention_max_distance=16)
    return text_source(Text(T5EncoderModel(config)), VOCAB)

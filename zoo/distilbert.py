"""DistilBERT (DistilBertModel) + seed 003's masked mean-pool head, tiny random-init."""

from __future__ import annotations

from typing import Any

from _common import VOCAB, Text, seeded, text_source, tiny
from transformers import DistilBertConfig, DistilBertModel


def model() -> dict[str, Any]:
    seeded()
    config = tiny(DistilBertConfig, vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2,
                  hidden_dim=64, max_position_embeddings=64)
    return text_source(Text(DistilBertModel(config), pool=True), VOCAB)

"""MPNet (MPNetModel) + seed 003's masked mean-pool head, tiny random-init.

MPNet has only eager attention in transformers 5 (its ``torch.where(mask, 0.0, min)``
mask is ``aten.where.ScalarOther``, which coremltools 9.0 cannot convert at its defaults;
nebisect's converter overrides cure it).
"""

from __future__ import annotations

from typing import Any

from _common import VOCAB, Text, seeded, text_source, tiny
from transformers import MPNetConfig, MPNetModel


def model() -> dict[str, Any]:
    seeded()
    config = tiny(MPNetConfig, attention="eager", vocab_size=VOCAB, hidden_size=32,
                  num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                  max_position_embeddings=66, relative_attention_num_buckets=32)
    return text_source(Text(MPNetModel(config, add_pooling_layer=False), pool=True), VOCAB)

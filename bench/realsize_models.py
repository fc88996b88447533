"""Real-size factories for ``bench/realsize.py``: transformers' own classes at their
default configs, random init, seeded, with the input domains ``run`` declares for the
zoo's models (a normalized pixel range, token ids under the vocabulary size).

``NAME`` is the real size (ResNet-50 and ViT-B/16 at 224×224, BERT-base at sequence 128
with SDPA attention, GPT-2 124 M at sequence 64); ``NAME_small`` is the same class at a
tiny config and short inputs, for a quick check that the bench works. Each is a
``file.py:factory`` source; the zoo's shared pieces (wrappers, inputs, domains) are
imported from ``zoo/_common.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "zoo"))

from _common import (
    HALF_NORM,
    IMAGENET_NORM,
    CausalLM,
    Text,
    Vision,
    image_source,
    seeded,
    text_source,
    tiny,
    token_inputs,
)
from transformers import (
    BertConfig,
    BertModel,
    GPT2Config,
    GPT2LMHeadModel,
    ResNetConfig,
    ResNetModel,
    ViTConfig,
    ViTModel,
)

#: the image side and sequence lengths of the real-size runs, and of the small ones
IMAGE, SMALL_IMAGE = 224, 32
BERT_LENGTH, GPT2_LENGTH, SMALL_LENGTH = 128, 64, 16


def _text(module: Any, vocab: int, length: int, masked: tuple[str, ...]) -> dict[str, Any]:
    """A text factory's dict at a fixed ``length`` (no dynamic dims: one shape is run)."""
    source = text_source(module, vocab, masked, dynamic=False)
    source["example_inputs"] = token_inputs(vocab, length)
    return source


def _resnet(config: ResNetConfig, size: int) -> dict[str, Any]:
    seeded()
    return image_source(Vision(ResNetModel(config), ("pooler_output",)), IMAGENET_NORM, size)


def _vit(config: ViTConfig, size: int) -> dict[str, Any]:
    seeded()
    return image_source(Vision(ViTModel(config), ("last_hidden_state",)), HALF_NORM, size)


def _bert(config: BertConfig, length: int) -> dict[str, Any]:
    seeded()
    module = Text(BertModel(config, add_pooling_layer=False), pool=True)
    return _text(module, config.vocab_size, length, ("last_hidden_state",))


def _gpt2(config: GPT2Config, length: int) -> dict[str, Any]:
    seeded()
    return _text(CausalLM(GPT2LMHeadModel(config)), config.vocab_size, length, ("logits",))


def resnet50() -> dict[str, Any]:
    return _resnet(tiny(ResNetConfig, attention=None), IMAGE)


def vit_b16() -> dict[str, Any]:
    return _vit(tiny(ViTConfig), IMAGE)


def bert_base() -> dict[str, Any]:
    return _bert(tiny(BertConfig), BERT_LENGTH)


def gpt2() -> dict[str, Any]:
    return _gpt2(tiny(GPT2Config), GPT2_LENGTH)


def resnet50_small() -> dict[str, Any]:
    return _resnet(tiny(ResNetConfig, attention=None, embedding_size=16, hidden_sizes=[16, 32],
                        depths=[1, 1], layer_type="basic"), SMALL_IMAGE)


def vit_b16_small() -> dict[str, Any]:
    return _vit(tiny(ViTConfig, image_size=SMALL_IMAGE, patch_size=8, hidden_size=32,
                     num_hidden_layers=2, num_attention_heads=2, intermediate_size=64),
                SMALL_IMAGE)


def bert_base_small() -> dict[str, Any]:
    return _bert(tiny(BertConfig, vocab_size=1000, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64),
                 SMALL_LENGTH)


def gpt2_small() -> dict[str, Any]:
    return _gpt2(tiny(GPT2Config, vocab_size=1000, n_positions=64, n_embd=32, n_layer=2,
                      n_head=2, bos_token_id=999, eos_token_id=999), SMALL_LENGTH)

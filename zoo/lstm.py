"""A plain-torch LSTM (2 layers) over a dynamic sequence of 16 features, with a linear head."""

from __future__ import annotations

from typing import Any

import torch
from _common import LENGTH, SEED, SEQ, seeded
from torch import nn


class Tagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(16, 32, num_layers=2, batch_first=True)
        self.head = nn.Linear(32, 10)

    def forward(self, features: torch.Tensor) -> dict[str, torch.Tensor]:
        states, _ = self.lstm(features)
        return {"last_hidden_state": states, "logits": self.head(states[:, -1])}


def model() -> dict[str, Any]:
    seeded()
    generator = torch.Generator().manual_seed(SEED)
    features = torch.rand(1, LENGTH, 16, generator=generator) * 2 - 1
    return {"module": Tagger(), "example_inputs": {"features": features},
            "dynamic_dims": {"features": {1: SEQ}},
            "input_domains": {"features": (-1.0, 1.0)}}

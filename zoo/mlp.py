"""A plain-torch MLP over 16 standardized features (Linear-GELU-LayerNorm blocks)."""

from __future__ import annotations

from typing import Any

import torch
from _common import SEED, seeded
from torch import nn


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 64), nn.GELU(), nn.LayerNorm(64),
                                 nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 10))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net(features)


def model() -> dict[str, Any]:
    seeded()
    features = torch.randn(1, 16, generator=torch.Generator().manual_seed(SEED)).clamp(-3, 3)
    return {"module": MLP(), "example_inputs": {"features": features},
            "input_domains": {"features": (-3.0, 3.0)}}

"""A plain-torch small CNN: conv-BN-ReLU-pool twice, global average pool, linear head."""

from __future__ import annotations

from typing import Any

import torch
from _common import IMAGENET_NORM, image_source, seeded
from torch import nn


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(16, 10)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(pixel_values))


def model() -> dict[str, Any]:
    seeded()
    return image_source(CNN(), IMAGENET_NORM)

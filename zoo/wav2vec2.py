"""Wav2Vec2 (Wav2Vec2Model), tiny random-init: 800 samples of raw audio (static).

A dynamic length (400-1600) does not export: the two strided convolutions make
torch.export guard on ``(L // 5 - 5) // 4`` and it suggests ``L = 20 * k`` instead.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from _common import seeded, tiny
from transformers import Wav2Vec2Config, Wav2Vec2Model

SAMPLES = 800  # 39 frames after the two convolutions


class Encoder(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_values: torch.Tensor) -> dict[str, torch.Tensor]:
        out = self.model(input_values=input_values, return_dict=True)
        return {"last_hidden_state": out["last_hidden_state"]}


def model() -> dict[str, Any]:
    seeded()
    config = tiny(Wav2Vec2Config, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 4),
                  conv_kernel=(10, 4), num_conv_pos_embeddings=16,
                  num_conv_pos_embedding_groups=2, feat_extract_norm="group")
    t = torch.arange(SAMPLES, dtype=torch.float32)
    audio = 0.5 * torch.sin(2 * math.pi * 440 * t / 16000) + 0.1 * torch.sin(t / 7)
    return {"module": Encoder(Wav2Vec2Model(config)),
            "example_inputs": {"input_values": audio.unsqueeze(0)},
            "input_domains": {"input_values": (-1.0, 1.0)}}

"""Whisper encoder (WhisperEncoder), tiny random-init: 16 mel bins x 32 frames."""

from __future__ import annotations

from typing import Any

import torch
from _common import SEED, seeded, tiny
from transformers import WhisperConfig
from transformers.models.whisper.modeling_whisper import WhisperEncoder

MELS, POSITIONS = 16, 16  # the encoder requires exactly 2 * max_source_positions frames
# WhisperFeatureExtractor's features: max(log10 mel, max - 8), then (x + 4) / 4.
FEATURES = (-1.5, 2.0)


class Encoder(torch.nn.Module):
    def __init__(self, encoder: torch.nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, input_features: torch.Tensor) -> dict[str, torch.Tensor]:
        out = self.encoder(input_features=input_features, return_dict=True)
        return {"last_hidden_state": out["last_hidden_state"]}


def model() -> dict[str, Any]:
    seeded()
    config = tiny(WhisperConfig, vocab_size=100, num_mel_bins=MELS, d_model=32,
                  encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=64,
                  decoder_layers=1, decoder_attention_heads=2, decoder_ffn_dim=64,
                  max_source_positions=POSITIONS, max_target_positions=16,
                  pad_token_id=99, bos_token_id=98, eos_token_id=98, decoder_start_token_id=97)
    generator = torch.Generator().manual_seed(SEED)
    features = torch.rand(1, MELS, 2 * POSITIONS, generator=generator) * 2 - 1
    return {"module": Encoder(WhisperEncoder(config)),
            "example_inputs": {"input_features": features},
            "input_domains": {"input_features": FEATURES}}

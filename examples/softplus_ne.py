"""Seed 000's softplus twin: conv → softplus → linear (coremltools #2687).

The same delta conv and pick-element head as ``logsumexp_ne.py``, with ``softplus`` in
place of the channel logsumexp. On the Neural Engine, fp16 ``softplus`` collapses to 0.0
once exp(x) passes 2^15, at x ≈ 10.397 = ln 2^15 — a different internal precision from
the logsumexp's log(65504/32). The example input is benign (x = 2.5); ``nebisect run
examples/softplus_ne.py:model`` finds the cliff by itself.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

SPATIAL = 8
CHANNELS = 32
FLAT_DIM = SPATIAL * SPATIAL * CHANNELS


class M(nn.Module):
    """conv -> softplus -> flatten -> linear (pick-element)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, CHANNELS, kernel_size=3, padding="same")
        self.flatten = nn.Flatten()
        self.fc = nn.Linear(FLAT_DIM, 16)
        with torch.no_grad():
            # Delta conv: conv output[k, i, j] = input[0, i, j] (kernel centre only).
            self.conv.weight.zero_()
            self.conv.weight[:, 0, 1, 1] = 1.0
            self.conv.bias.zero_()
            # Pick-element head: fc.out[k] = flat[k] for k in 0..15.
            self.fc.weight.zero_()
            self.fc.weight.fill_diagonal_(1.0)
            self.fc.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.flatten(nn.functional.softplus(self.conv(x))))


def model() -> dict[str, Any]:
    """The nebisect torch-source contract; a benign example input, x = 2.5."""
    return {
        "module": M(),
        "example_inputs": {"x": torch.full((1, 1, SPATIAL, SPATIAL), 2.5)},
    }

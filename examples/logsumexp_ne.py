"""Seed 000's conv → logsumexp(dim=1) → linear model (coremltools #2690).

The delta conv copies the input into all 32 channels, so the channel logsumexp is
``x + log(32)``; the pick-element head returns its first 16 values. On the Neural
Engine, fp16 ``reduce_log_sum_exp`` skips the max-shift and collapses to 0.0 once
``32·exp(x)`` overflows fp16, at x ≈ 7.63 = log(65504/32). Feed a constant input::

    nebisect run examples/logsumexp_ne.py:model --inputs x_7p7.npz

(``x_7p7.npz`` holding ``x = np.full((1, 1, 8, 8), 7.7, np.float32)``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

SPATIAL = 8
CHANNELS = 32
FLAT_DIM = SPATIAL * SPATIAL * CHANNELS


class M(nn.Module):
    """conv -> lsexp(channel-reduce, broadcast) -> flatten -> linear (pick-element)."""

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
        c = self.conv(x)
        y = torch.logsumexp(c, dim=1, keepdim=True).expand_as(c)
        return self.fc(self.flatten(y))


def model() -> dict[str, Any]:
    """The nebisect torch-source contract; the example input is the report's x = 2.5."""
    return {
        "module": M(),
        "example_inputs": {"x": torch.full((1, 1, SPATIAL, SPATIAL), 2.5)},
    }

"""Torch factories for the input-domain tests: a pixel model that overflows fp16 only
far beyond its declared range."""

import torch
from torch import nn


class Head(nn.Module):
    """A pixel model whose Linear sums 64 terms: fp16 overflows once pixels reach 1024."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(64, 4)
        with torch.no_grad():
            self.linear.weight.fill_(1.0)
            self.linear.bias.zero_()

    def forward(self, pixel_values):
        return self.linear(pixel_values.flatten(1)) / 4096


def model():
    """Pixels in [0, 1], as the factory declares."""
    return {"module": Head(), "example_inputs": (torch.rand(1, 64),),
            "input_domains": {"pixel_values": (0.0, 1.0)}}


def undeclared():
    """The same model without a declared domain."""
    return {"module": Head(), "example_inputs": (torch.rand(1, 64),)}


class PaddedGarbage(nn.Module):
    """Hidden states that are exact at valid positions and overflow fp16 at padded ones
    (exp(12 · x) > 65504 on the way to 16.3): what a padded position holds is nobody's
    bug."""

    def forward(self, hidden, attention_mask):
        valid = attention_mask.unsqueeze(-1) > 0
        return {"last_hidden_state": torch.where(valid, hidden, torch.exp(hidden * 12) / 10000)}


def _padded(masked_outputs=None):
    hidden = torch.ones(1, 6, 4)
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]])
    made = {"module": PaddedGarbage(), "example_inputs": (hidden, mask),
            "input_domains": {"hidden": (-1.0, 1.0), "attention_mask": "mask"}}
    if masked_outputs is not None:
        made["masked_outputs"] = masked_outputs
    return made


def padded_inferred():
    """Which output follows the mask is inferred from the [batch, seq, …] shape."""
    return _padded()


def padded_unmasked():
    """The factory says no output follows the mask: padded positions are compared."""
    return _padded({})

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

import math

import torch
from torch import nn


class TimestepBlock(nn.Module):
    """A diffusion-style block: the sinusoidal timestep embedding pins float32
    (``timesteps.float()``, as diffusers writes it)."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(32, 16)
        self.out = nn.Linear(16, 16)

    def forward(self, x, timesteps):
        freqs = torch.exp(-math.log(10000.0) * torch.arange(16, dtype=torch.float32) / 16)
        args = timesteps.float()[:, None] * freqs[None]
        emb = torch.cat([torch.cos(args), torch.sin(args)], dim=-1)
        return self.out(x + self.embed(emb))


def model():
    torch.manual_seed(0)
    return {"module": TimestepBlock(),
            "example_inputs": {"x": torch.randn(1, 16), "timesteps": torch.tensor([981.0])}}

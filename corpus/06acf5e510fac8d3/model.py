"""``nn.RMSNorm`` converted with its epsilon scaled by ``max|x|²`` — wrong on small activations.

Source: apple/coremltools issue #2821, "rms_norm translation inflates eps by max(|x|)^2 —
percent-level errors on spiky activations even at FLOAT32 / CPU_ONLY" (open). To keep fp16
in range the torch frontend computes ``sqrt(mean((x/m)²) + eps) · m`` with ``m = max|x|``,
which is ``sqrt(mean(x²) + eps·m²)``: the epsilon is rescaled by ``m²``. The report sees
4–6 % on spiky activations (``m ≫ rms``); the same algebra makes the epsilon vanish when
``m ≪ 1``, so on activations of magnitude ~1e-3 (``mean(x²) ≈ eps``) torch divides by
``sqrt(2·eps)`` and Core ML by ``sqrt(eps)`` — every output is √2 too large. Checked with
coremltools 9.0 / torch 2.13: both conversion paths emit the rescaled formula.

What nebisect should report with :data:`TRIGGER` (the example scaled by 1e-3): ``mismatch``
/ ``tolerance`` on ``sim:fp32``, ``sim:fp16`` and ``sim:ane``, attributed ``conversion``
(the converted program evaluated in float64 already disagrees with torch). At the example
(unit-scale normal activations) the relative error is ~1e-6, inside every tolerance.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

HIDDEN = 64
EPS = 1e-6
#: Tiny activations: the example scaled by 1e-3, so mean(x²) ≈ 1e-6 = eps.
SCALE = 1e-3


class Norm(torch.nn.Module):
    """A transformer block's RMSNorm (unit weight)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.RMSNorm(HIDDEN, eps=EPS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def _example() -> torch.Tensor:
    return torch.randn(1, 4, HIDDEN, generator=torch.Generator().manual_seed(0))


TRIGGER = {"x": (_example().numpy() * SCALE).astype(np.float32)}


def model() -> dict[str, Any]:
    """Benign example: unit-scale normal activations."""
    return {"module": Norm(), "example_inputs": {"x": _example()}}

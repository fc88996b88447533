"""``GELU(approximate="tanh")`` becomes the exact GELU on the torch.export path only.

Source: apple/coremltools PR #2863, "Fix torch gelu converter ignoring the approximate keyword
argument" (open). The converter reads ``approximate`` only as a positional input, which is
how TorchScript carries it; torch.export keeps it a keyword (``aten.gelu.default(x,
approximate='tanh')``), so the exported program computes the erf GELU. The two differ by up
to ~5e-4 (|x| ≈ 2–3; relative error 3 % at x = -2.5, 80 % at x = -4). Affects Gemma,
SigLIP, GPT-BigCode (``gelu_pytorch_tanh``). Checked with coremltools 9.0 / torch 2.13:
torch.export → ``gelu(mode="EXACT")``, jit.trace → ``gelu(mode="TANH_APPROXIMATION")``.

What nebisect should report with :data:`TRIGGER`: ``mismatch`` / ``tolerance`` on
``sim:fp32`` attributed ``conversion`` — on the torch.export path only; the jit.trace
program agrees with torch. (fp16 targets: the 5e-4 gap is below fp16's 16-ULP tolerance at
these magnitudes except in the far negative tail.) At the example (|x| ≤ 0.25) the two
GELUs differ by at most 1.2e-6, inside the fp32 tolerance.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

#: Where the two GELUs differ most (|x| ≈ 2–4).
TRIGGER = {"x": np.array([[-4.0, -3.0, -2.5, -2.0, -1.0, 1.0, 2.0, 3.0]], np.float32)}


class TanhGelu(torch.nn.Module):
    """Hugging Face's ``gelu_pytorch_tanh`` activation."""

    def __init__(self) -> None:
        super().__init__()
        self.act = torch.nn.GELU(approximate="tanh")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(x)


def model() -> dict[str, Any]:
    """Benign example: small pre-activations, where both GELUs agree to ~1e-6."""
    return {"module": TanhGelu(),
            "example_inputs": {"x": torch.linspace(-0.25, 0.25, 8).reshape(1, 8)}}

"""Llama's RMSNorm in an fp16 Core ML program: ``x²`` overflows once |x| > 256.

Source: pytorch/executorch PR #19523, "Add CoreML-stable RMSNorm for llama eager paths" (and
PR #8641, "Add dtype, fix RMS norm for FP16": Llama-1B output degenerates on Core ML in
fp16). Hugging Face's ``LlamaRMSNorm`` upcasts to float32 before ``pow(2).mean()``;
coremltools' FLOAT16 compute precision drops that cast, so the squares are stored in fp16
and overflow for activations above 256 (residual-stream outliers), ``rsqrt(inf) = 0`` and
the whole row collapses to 0. Checked with coremltools 9.0 / torch 2.13: both paths emit
``cast`` → ``pow``/``mul`` → ``reduce_mean`` → ``rsqrt`` with every value in fp16.

What nebisect should report with :data:`TRIGGER` (the example scaled by 300): ``mismatch``
/ ``collapse`` on ``sim:fp16`` and ``sim:ane``, attributed ``precision`` (the float64
evaluation of the same program agrees with torch); ``sim:fp32`` passes. At the example
(unit-scale normal activations) every square fits fp16.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

HIDDEN = 64
EPS = 1e-6
#: Outlier activations: |x| up to ~700, squares up to ~5e5 > 65504.
SCALE = 300.0


class LlamaRMSNorm(torch.nn.Module):
    """Hugging Face's ``LlamaRMSNorm`` (unit weight), float32 upcast included."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(HIDDEN))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + EPS)
        return self.weight * hidden_states.to(dtype)


def _example() -> torch.Tensor:
    return torch.randn(1, 4, HIDDEN, generator=torch.Generator().manual_seed(0))


TRIGGER = {"hidden_states": (_example().numpy() * SCALE).astype(np.float32)}


def model() -> dict[str, Any]:
    """Benign example: unit-scale normal activations."""
    return {"module": LlamaRMSNorm(), "example_inputs": {"hidden_states": _example()}}

"""Models whose fp16 or fp32 trouble is their own conditioning, or Core ML's alone.

* :func:`standardized` — ``(x - mean) / sqrt(var + 1e-12)`` over 48 features, what a
  feature extractor does to a waveform. At a constant input the float64 reference is 0
  everywhere (the spread is exactly zero), while every fp16 evaluation — the converted
  program's, and torch's own in half — loses the 1e-12 to fp16's underflow and divides 0
  by 0; in fp32 the rounding of ``x − mean`` (7e-9 at 0.1) is amplified by 1/√1e-12, in
  torch fp32 itself as in the program. The model's conditioning, not Core ML's.
* :func:`half_refused` — the same, refused by torch in half (as a model with ``cdist``
  is): compared with torch fp32, which holds the variation fp16 loses.
* Core ML far worse than torch at the same precision: ``examples/logsumexp_ne.py`` on
  ``sim:fp16-naive`` (fp16 arithmetic without the max-shift) collapses from x ≈ 7.63,
  where torch's ``logsumexp`` in half is exact to its rounding.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

FEATURES = 64
#: a constant input: the spread is zero, in float64 exactly
CONSTANT = {"x": np.full((1, FEATURES), 0.1, np.float32)}
#: a DC offset of 1 with a variation fp16 cannot hold (its spacing at 1 is 1e-3)
BELOW_FP16 = {"x": (1.0 + 1e-4 * np.random.default_rng(0).standard_normal((1, FEATURES))
                    ).astype(np.float32)}


class Standardize(torch.nn.Module):
    """Each row centred and divided by its spread, with a BERT-sized epsilon."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        centred = x - x.mean(-1, keepdim=True)
        variance = (centred * centred).mean(-1, keepdim=True)
        return centred / torch.sqrt(variance + 1e-5)


def standardized() -> dict[str, Any]:
    """Benign example: a normal draw, whose spread fp16 holds."""
    example = torch.randn(1, FEATURES, generator=torch.Generator().manual_seed(0))
    return {"module": Standardize(), "example_inputs": {"x": example}}


class HalfRefused(Standardize):
    """:class:`Standardize` as a model with an op torch has no half kernel for on the
    CPU (``cdist``, ``fft``) fails in fp16: torch in half is not comparable."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float16:
            raise NotImplementedError("\"standardize_cpu\" not implemented for 'Half'")
        return super().forward(x)


def half_refused() -> dict[str, Any]:
    """:func:`standardized`, which torch cannot run in half."""
    return {**standardized(), "module": HalfRefused()}

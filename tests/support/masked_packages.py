"""Packages whose output at padded positions overflows fp16: the package twins of
:class:`support.domain_models.PaddedGarbage`.

``save_padded_packages(directory)`` converts :class:`PaddedAttention` (a ``jit.trace``,
coremltools' defaults: fp16 compute, iOS 16) with hidden states ``[1, 6, 4]`` and an
``attention_mask`` ``[1, 6]`` three ways: ``int`` (an int32 mask: it gates a softmax and
a select, so the graph reads it as a mask), ``flexible`` (the same with the sequence a
``RangeDim(1, 16)``: once loaded, the mask's, the hidden states' and the output's
sequence are three different symbols) and ``float`` (a float32 mask: the graph reads no
role off a float input, so nothing says it is a mask). :data:`PADDED_INPUTS` are the
inputs every test feeds: ones, the last two positions padded.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch
from torch import nn

#: hidden states of ones, a mask whose last two positions are padding
PADDED_INPUTS = {"hidden": np.ones((1, 6, 4), np.float32),
                 "attention_mask": np.array([[1, 1, 1, 1, 0, 0]], np.int32)}
#: the elements of ``out`` the mask leaves padded: 2 positions × 4 channels
PADDED_ELEMENTS = 8


class PaddedAttention(nn.Module):
    """Softmax-weighted hidden states at valid positions; at padded ones
    exp(12 · h) / 10⁴ — 16.3 at h = 1, on the way through 162 755, past fp16's 65 504."""

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = attention_mask.to(hidden.dtype)
        scores = hidden.sum(-1) + (1.0 - mask) * -1e4
        weights = torch.softmax(scores, dim=-1).unsqueeze(-1)
        valid = mask.unsqueeze(-1) > 0
        return torch.where(valid, hidden * (1 + weights), torch.exp(hidden * 12) / 10000)


def save_padded_packages(directory: Path) -> dict[str, Path]:
    """name → package path of every package in the module docstring (output ``out``)."""
    import coremltools as ct

    variants = {"int": (np.int32, 6), "flexible": (np.int32, ct.RangeDim(1, 16, default=6)),
                "float": (np.float32, 6)}
    paths = {}
    for name, (mask_dtype, seq) in variants.items():
        example = (torch.ones(1, 6, 4), torch.tensor(PADDED_INPUTS["attention_mask"]).to(
            torch.int32 if mask_dtype == np.int32 else torch.float32))
        traced = torch.jit.trace(PaddedAttention().eval(), example)
        with warnings.catch_warnings():
            # coremltools' optimize_repeat_ops pass warns of an overflow casting a range
            warnings.simplefilter("ignore", RuntimeWarning)
            model = ct.convert(
                traced, convert_to="mlprogram", minimum_deployment_target=ct.target.iOS16,
                inputs=[ct.TensorType("hidden", shape=(1, seq, 4), dtype=np.float32),
                        ct.TensorType("attention_mask", shape=(1, seq), dtype=mask_dtype)],
                outputs=[ct.TensorType("out")])
        paths[name] = directory / f"{name}.mlpackage"
        model.save(str(paths[name]))
    return paths

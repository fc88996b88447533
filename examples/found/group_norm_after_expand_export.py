"""``group_norm`` of a tensor ``expand``-ed to a flexible length: torch.export's
conversion fails on a channel count coremltools no longer knows.

Found by ``nebisect atlas --patterns 50 --seed 0`` (program ``0:13``, shrunk to
``gather_small_index`` → ``norm_variant``: a gather whose index is ``expand``-ed to
``x.shape``, then ``group_norm``). coremltools 9.0 lowers an ``expand`` whose sizes are
read at run time to ``tile`` with repetitions computed from them, and gives its output
a symbol for every dimension — the static ones too (``(1, L, 4)`` becomes
``(is28, is29, is30)``). ``group_norm``'s converter then takes the channel count from
that shape and compares it with the group count (``min(num_groups, c)``), which a symbol
cannot answer: ``TypeError: cannot determine truth value of Relational: is8 < 2``. The
same graph without the ``expand`` converts. Not reported upstream that we could find
(searched the apple/coremltools tracker for group_norm with flexible shapes: #1303 and
#2047 are closed and about rank and spatial dims; PR #2808, open, makes a symbolic
*batch* dimension take ``group_norm``'s dynamic path — the channel count stays assumed
static). Checked with coremltools 9.0 / torch 2.13; the trace path fails too, earlier,
on NumPy 2.4 (coremltools #2633), so only the export path tells this failure.

A model that broadcasts a per-sequence vector over a flexible length before a group
normalization (``v.expand(batch, length, channels)``, audio and time-series encoders)
converts only with the length fixed.

What ``run`` reports with the example: ``error`` at ``convert`` on torch.export,
attributed ``conversion``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


class ExpandThenGroupNorm(torch.nn.Module):
    """The first position broadcast over the length, normalized in two groups of
    channels (channels first)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        spread = x[:, :1].expand(x.shape[0], x.shape[1], 4)
        return F.group_norm(spread.transpose(1, 2), 2).transpose(1, 2) + x


def model() -> dict[str, Any]:
    return {"module": ExpandThenGroupNorm(),
            "example_inputs": {"x": torch.randn(1, 6, 4,
                                                generator=torch.Generator().manual_seed(0))},
            "dynamic_dims": {"x": {1: (2, 16)}}}

"""Seed 000's softplus twin: conv → softplus → linear (coremltools #2687).

The same delta conv and pick-element head as ``logsumexp_ne.py`` (imported from it),
with ``softplus`` in place of the channel logsumexp. On the Neural Engine, fp16
``softplus`` collapses to 0.0 once exp(x) passes 2^15, at x ≈ 10.397 = ln 2^15 — a
different internal precision from the logsumexp's log(65504/32). The example input is
benign (x = 2.5); ``nebisect run examples/softplus_ne.py:model`` finds the cliff by itself.
"""

from __future__ import annotations

from typing import Any

import torch
from logsumexp_ne import SPATIAL
from logsumexp_ne import M as Seed000


class M(Seed000):
    """conv -> softplus -> flatten -> linear (pick-element)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.flatten(torch.nn.functional.softplus(self.conv(x))))


def model() -> dict[str, Any]:
    """The nebisect torch-source contract; a benign example input, x = 2.5."""
    return {
        "module": M(),
        "example_inputs": {"x": torch.full((1, 1, SPATIAL, SPATIAL), 2.5)},
    }

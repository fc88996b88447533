"""A torch factory whose conversion fails at coremltools' defaults (torch 2.13 +
coremltools 9.0) for a reason nebisect's converter overrides cure: ``x.new_ones`` on
both paths, ``&`` (``aten.__and__``) on torch.export. ``run`` converts it again with the
overrides and judges that program; ``--strict-conversion`` stops at the failure."""

from __future__ import annotations

from typing import Any

import torch


class NewOnes(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        keep = x.new_ones((), dtype=torch.bool) & (x > 0)
        return torch.where(keep, x, x.new_ones(x.shape[1]) * 2)


def model() -> dict[str, Any]:
    return {"module": NewOnes(), "example_inputs": (torch.linspace(-2.0, 2.0, 10).reshape(2, 5),)}

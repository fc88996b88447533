"""A tiny model coremltools cannot convert: ``torch.lgamma`` has no Core ML lowering.

Both conversion paths raise (torch.export: ``Unsupported fx node lgamma``; jit.trace:
``PyTorch convert function for op 'lgamma' not implemented``); ``nebisect run`` reports
a ``convert``-stage error carrying those messages, and keeps running::

    nebisect run examples/convert_fails.py:model
"""

from __future__ import annotations

from typing import Any

import torch


class LogGamma(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.lgamma(x) + 1.0


def model() -> dict[str, Any]:
    """The nebisect torch-source contract for a model whose conversion raises."""
    return {"module": LogGamma(), "example_inputs": {"x": torch.rand(1, 4) + 0.5}}

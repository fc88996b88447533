"""``torch.reciprocal`` converted to MIL ``inverse`` with its default epsilon 1e-4.

Source: apple/coremltools PR #2773, "Do not add MIL's stability epsilon in torch.reciprocal"
(merged after the 9.0 release). ``mb.inverse`` computes ``1 / (x + 1e-4)``; the converter
never set ``epsilon``, so ``1.0 / x`` is off by ``~1e-4 / x²`` — 50 % at x = 1e-4, 9 % at
1e-3. coremltools' own test used inputs in (20, 100), where the offset stays inside its
tolerance, which is why it was missed. Checked with coremltools 9.0 / torch 2.13: both paths
emit ``inverse`` with the default epsilon.

What nebisect should report with :data:`TRIGGER` (the PR's inputs): ``mismatch`` /
``tolerance`` on ``sim:fp32``, ``sim:fp16`` and ``sim:ane``, attributed ``conversion``. The
example uses the test's range (20–100), where the error is < 3e-7 relative. Today's ``run``
finds this one anyway: its generated standard-normal input has values near 0.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

#: The PR's inputs.
TRIGGER = {"x": np.array([[1e-4, 1e-3, 1e-2, 0.25, 1.0]], np.float32)}


class Reciprocal(torch.nn.Module):
    """``1.0 / x`` — TorchScript and torch.export both see ``aten.reciprocal``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 1.0 / x


def model() -> dict[str, Any]:
    """Benign example: coremltools' own test range."""
    return {"module": Reciprocal(),
            "example_inputs": {"x": torch.tensor([[20.0, 35.0, 50.0, 75.0, 100.0]])}}

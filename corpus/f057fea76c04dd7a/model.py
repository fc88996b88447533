"""``x % 1`` converts to ``x - x``: zeros for every input.

Source: apple/coremltools issue #2836, "torch conversion: x % 1 (remainder with divisor 1)
silently converts to zeros" (closed). ``x % 1``, ``x % 1.0`` and ``torch.remainder(x, 1.0)``
come out as zeros (a TTS vocoder's phase accumulator ``(f0 / sample_rate) % 1`` collapsed);
any other divisor is fine. Checked with coremltools 9.0 / torch 2.13: both paths emit
``sub(x, x)`` — the floor_div by 1 is folded to ``x`` and the remainder to ``x - x``.

What nebisect should report with :data:`TRIGGER` (fractional phases): ``mismatch`` /
``tolerance`` (output 0 vs reference 0.25, …) on ``sim:fp32``, ``sim:fp16`` and ``sim:ane``,
attributed ``conversion``. The example phases are whole cycles, where ``x % 1`` is 0 and
the broken program happens to be right. Today's ``run`` finds this one anyway: its
generated standard-normal input is fractional.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

#: The report's input.
TRIGGER = {"phase": np.array([[0.25, 1.25, 2.5, 7.3, 100.3]], np.float32)}


class Wrap(torch.nn.Module):
    """Wrap an accumulated phase to [0, 1)."""

    def forward(self, phase: torch.Tensor) -> torch.Tensor:
        return phase % 1


def model() -> dict[str, Any]:
    """Benign example: whole cycles, where the wrapped phase is 0."""
    return {"module": Wrap(),
            "example_inputs": {"phase": torch.tensor([[0.0, 1.0, 2.0, 7.0, 100.0]])}}

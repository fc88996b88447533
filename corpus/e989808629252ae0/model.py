"""In-place ``y[:, position] = val`` on a slice is dropped on the jit.trace path.

Source: apple/coremltools#2188, "[torch.jit.trace] Inplace Index Put Silent Error" (open).
The reporter's model (``y = x.clone(); y[:, position] = val; return y``) "can be converted
but gives incorrect result": TorchScript writes through ``slice(y)`` → ``index_put_``, and
the converter does not see that the slice is a view of ``y`` — it returns ``y`` as it was
before the write. torch.export functionalizes the write and converts correctly.

Checked with coremltools 9.0 / torch 2.13: with the reporter's ``x.clone()`` the trace
program returns its own input and conversion now fails (``AssertionError: Main block's input
name, 'x', is different from its corresponding var's name``) while torch.export converts — a
one-path conversion failure. With any op before the write (here ``-x``) the trace program
converts and silently leaves the row unwritten: the reporter's symptom, max abs error = the
written value's distance from ``-x`` at that position.

The bug needs no special value: it needs the conversion path. What nebisect should report:
``mismatch`` / ``tolerance`` attributed ``conversion`` on the jit.trace path only, at every
input; the torch.export path passes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


class IndexPut(torch.nn.Module):
    """The report's model, with a negation in place of the clone so that the trace converts."""

    def forward(self, x: torch.Tensor, position: torch.Tensor, val: torch.Tensor) -> torch.Tensor:
        y = -x
        y[:, position] = val
        return y


def _example() -> dict[str, torch.Tensor]:
    return {"x": torch.randn(2, 4, generator=torch.Generator().manual_seed(0)),
            "position": torch.tensor([1]), "val": torch.tensor([5.0])}


#: Any input shows it on the jit.trace path; the trigger is the conversion path.
TRIGGER = {name: value.numpy() for name, value in _example().items()}
TRIGGER["position"] = TRIGGER["position"].astype(np.int32)


def model() -> dict[str, Any]:
    """A 2×4 standard-normal input, column 1 overwritten with 5."""
    return {"module": IndexPut(), "example_inputs": _example()}

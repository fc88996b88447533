"""``torch.var``/``torch.std`` with ``correction=2`` lose the correction on the jit.trace path.

Source: apple/coremltools PR #2718, "Fix torch var/std converter ignoring correction > 1
under tracing" (merged after the 9.0 release). Under ``torch.jit.trace`` the ``correction``
keyword lands in the same positional slot as the old boolean ``unbiased``; the converter
reads it as a bool, so every ``correction >= 2`` becomes ``unbiased=True`` (divide by
N - 1 instead of N - 2). torch.export keeps ``correction`` by name and converts correctly.
The PR's reproducer (``torch.var(x, dim=-1, correction=2, keepdim=True)`` on a 3×5 input)
gives 2.762 in torch and 2.072 in Core ML. Checked with coremltools 9.0 / torch 2.13: the
trace program divides by N - 1 = 4; the export program by N - 2 = 3.

The bug needs no special value: it needs the conversion path. What nebisect should report:
``mismatch`` / ``tolerance`` attributed ``conversion`` on the jit.trace path only, at every
input (std is off by sqrt(3/4)). Today's ``run`` evaluates only the first program that
converts — torch.export's, which is right — so it reports a pass even with :data:`TRIGGER`.
"""

from __future__ import annotations

from typing import Any

import torch


class SampleVar(torch.nn.Module):
    """The PR's model: variance with two degrees of freedom removed."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.var(x, dim=-1, correction=2, keepdim=True)


def _example() -> torch.Tensor:
    return torch.randn(3, 5, generator=torch.Generator().manual_seed(0))


#: Any input shows it on the jit.trace path; the trigger is the conversion path.
TRIGGER = {"x": _example().numpy()}


def model() -> dict[str, Any]:
    """The PR's 3×5 standard-normal input."""
    return {"module": SampleVar(), "example_inputs": {"x": _example()}}

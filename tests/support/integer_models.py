"""Torch factories with integer inputs and outputs (issue #23: exact integers, placement).

* :func:`add_one` — ``x + 1`` on an int32 input whose declared domain reaches int32's
  ends, so the ``bigints`` family feeds it 2^24 (output 2^24 + 1, which float32 cannot
  hold); an all-integer program, which the ``sim:ane`` profile places wholly on the CPU.
"""

from __future__ import annotations

from typing import Any

import torch


class AddOne(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


def add_one() -> dict[str, Any]:
    return {"module": AddOne(),
            "example_inputs": {"x": torch.arange(2, 10, dtype=torch.int32).reshape(1, 8)},
            "input_domains": {"x": (-(2**31), 2**31 - 2)}}

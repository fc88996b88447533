"""Torch factories whose buffers ``forward`` updates in place, converted with the buffers
as ``ct.StateType`` states (coremltools' stateful recipe, iOS 18), and their stateless
and misbehaving neighbours.

* :func:`running_sum` — ``acc += x; return acc * 1`` with ``acc`` a [1, 4] buffer of
  zeros: the torch twin of :func:`support.state_programs.running_sum` (scale 1), so an
  fp16 state overflows at step ⌈65504 / x⌉.
* :func:`cached` — a nested buffer (``inner.acc``) and a slice write (``k_cache[:, 1] =
  x``) beside a buffer only read, returned as a dict: converted through nebisect's
  wrapper, whose buffers are ``module.…``.
* :func:`scaled` — a buffer only read (``x * scale``): no state.
* :func:`raising` — a stateful ``forward`` that raises: no state found, its crash left
  to the cases.
"""

from __future__ import annotations

from typing import Any

import torch

SHAPE = (1, 4)


class RunningSum(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("acc", torch.zeros(*SHAPE))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.acc.add_(x)
        return self.acc * 1


class Cached(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = RunningSum()
        self.register_buffer("k_cache", torch.zeros(1, 3, 4))
        self.register_buffer("bias", torch.ones(*SHAPE))

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        self.k_cache[:, 1] = x
        return {"total": self.inner(x) + self.bias, "keys": self.k_cache.sum(1)}


class Scaled(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", torch.full(SHAPE, 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale


class Raising(RunningSum):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.acc.add_(x)
        raise RuntimeError("forward gives up")


def running_sum() -> dict[str, Any]:
    return {"module": RunningSum(), "example_inputs": {"x": torch.ones(*SHAPE)}}


def cached() -> dict[str, Any]:
    return {"module": Cached(), "example_inputs": {"x": torch.ones(*SHAPE)}}


def scaled() -> dict[str, Any]:
    return {"module": Scaled(), "example_inputs": {"x": torch.ones(*SHAPE)}}


def raising() -> dict[str, Any]:
    return {"module": Raising(), "example_inputs": {"x": torch.ones(*SHAPE)}}

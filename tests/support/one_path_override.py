"""Torch factories for ``run``'s discovery tests, and a test-only converter override.

* :func:`install` (a convert ``setup`` hook, like ``nebisect.fixes.converter_compat``) makes
  coremltools convert ``tanh`` to ``sigmoid`` on the jit.trace path only: the two
  conversion paths then emit different math for one module, and ``run --convert both``
  must report ``conversion`` on jit.trace and a pass on torch.export.
* :func:`model` — ``tanh`` with its example input given as a tuple (named by
  ``forward``'s parameter); :func:`variadic` — a ``forward(*args)`` whose inputs are
  named ``x0, x1`` by position.
"""

from __future__ import annotations

from typing import Any

import torch


class Tanh(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)


class Product(torch.nn.Module):
    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        return args[0] * args[1] + 1.0


def model() -> dict[str, Any]:
    return {"module": Tanh(), "example_inputs": (torch.linspace(-2.0, 2.0, 8).reshape(1, 8),)}


def variadic() -> dict[str, Any]:
    return {"module": Product(),
            "example_inputs": (torch.full((1, 4), 2.0), torch.full((1, 4), 3.0))}


def install() -> None:
    """Override coremltools' ``tanh`` converter: sigmoid under jit.trace, itself otherwise."""
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.frontend.torch.ops import _get_inputs
    from coremltools.converters.mil.frontend.torch.torch_op_registry import (
        _TORCH_OPS_REGISTRY,
        register_torch_op,
    )
    from coremltools.converters.mil.frontend.torch.utils import TorchFrontend

    original = _TORCH_OPS_REGISTRY.name_to_func_mapping["tanh"]

    def tanh(context: Any, node: Any) -> None:
        if context.frontend != TorchFrontend.TORCHSCRIPT:
            original(context, node)
            return
        (x,) = _get_inputs(context, node, expected=1)
        context.add(mb.sigmoid(x=x, name=node.name))

    register_torch_op(tanh, override=True)

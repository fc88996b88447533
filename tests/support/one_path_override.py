"""Torch factories for ``run``'s discovery tests, and a test-only converter override.

* :func:`install` (a convert ``setup`` hook, like ``nebisect.fixes.converter_compat``) makes
  coremltools convert ``tanh`` to ``sigmoid`` on the jit.trace path only: the two
  conversion paths then emit different math for one module, and ``run --convert both``
  must report ``conversion`` on jit.trace and a pass on torch.export.
* :func:`refuse_trace` (another ``setup`` hook) makes coremltools' ``tanh`` converter
  raise on the jit.trace path only: that path fails to convert while torch.export
  converts, a conversion failure of one path that ``run`` must report.
* :func:`model` — ``tanh`` with its example input given as a tuple (named by
  ``forward``'s parameter); :func:`variadic` — a ``forward(*args)`` whose inputs are
  named ``x0, x1`` by position; :func:`identity` — ``forward`` returns its input.
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


class Identity(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


def model() -> dict[str, Any]:
    return {"module": Tanh(), "example_inputs": (torch.linspace(-2.0, 2.0, 8).reshape(1, 8),)}


def variadic() -> dict[str, Any]:
    return {"module": Product(),
            "example_inputs": (torch.full((1, 4), 2.0), torch.full((1, 4), 3.0))}


def identity() -> dict[str, Any]:
    return {"module": Identity(), "example_inputs": {"x": torch.linspace(-1.0, 1.0, 4)[None]}}


#: what the overridden converter says on jit.trace (:func:`refuse_trace`)
REFUSAL = "tanh refused on jit.trace by a test override"


def refuse_trace() -> None:
    """Override coremltools' ``tanh`` converter: raise under jit.trace, itself otherwise."""
    from coremltools.converters.mil.frontend.torch.torch_op_registry import (
        _TORCH_OPS_REGISTRY,
        register_torch_op,
    )
    from coremltools.converters.mil.frontend.torch.utils import TorchFrontend

    original = _TORCH_OPS_REGISTRY.name_to_func_mapping["tanh"]

    def tanh(context: Any, node: Any) -> None:
        if context.frontend == TorchFrontend.TORCHSCRIPT:
            raise NotImplementedError(REFUSAL)
        original(context, node)

    register_torch_op(tanh, override=True)


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

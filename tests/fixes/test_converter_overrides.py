"""nebisect's converter overrides for torch 2.13 + transformers 5 + coremltools 9.0, one
test each: a tiny torch module using the op fails to convert (or converts wrong) at
coremltools' defaults, converts with the overrides, and the converted program computes
what torch does (through the simulator, in float64).

``new_ones`` / ``__and__`` / ``aten::Int`` are tested in tests/sources/test_convert.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

from nebisect.mil.interp import SimError, run_program
from nebisect.sources import converter_overrides
from nebisect.sources.convert import convert_source
from nebisect.sources.torch_module import TorchSource


@pytest.fixture(autouse=True)
def _restored() -> Iterator[None]:
    yield
    converter_overrides.uninstall()


def _convert(module: torch.nn.Module, inputs: dict[str, torch.Tensor], path: str, *,
             overrides: bool, dynamic: dict[str, dict[int, tuple[int, int]]] | None = None
             ) -> tuple[Any, str]:
    """The MIL program ``path`` converts ``module`` to (None when it fails) and the
    converter's message."""
    source = TorchSource("test:module", module.eval(), inputs, dynamic_dims=dynamic or {})
    if overrides:
        converter_overrides.install()
    try:
        models, [attempt] = convert_source(source, "fp32", paths=(path,))
    finally:
        converter_overrides.uninstall()
    model = models.get(path)
    return (model._mil_program if model is not None else None), attempt.message


def _agrees(program: Any, module: torch.nn.Module, inputs: dict[str, np.ndarray]) -> None:
    """The program's output equals torch's (float64 simulator, fp32 torch)."""
    [out] = run_program(program, inputs, "fp64").outputs.values()
    with torch.no_grad():
        expected = module(*(torch.from_numpy(v) for v in inputs.values())).numpy()
    assert out.shape == expected.shape
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)


class FullSlice(torch.nn.Module):
    """``x[:, 0:]`` — a ``*ForCausalLM``'s ``logits_to_keep=0`` slice — which
    torch.export records as ``aten.alias``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, 0:, :] * 2


class Alias(torch.nn.Module):
    """``aten::alias`` itself, which jit.trace keeps."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.aten.alias(x) * 2


@pytest.mark.parametrize(("module", "path", "failure"), [
    (FullSlice(), "export", "NotImplementedError: Unsupported fx node alias, kind alias"),
    (Alias(), "trace", "PyTorch convert function for op 'alias' not implemented"),
])
def test_alias_converts_as_its_input(module: torch.nn.Module, path: str, failure: str) -> None:
    x = {"x": torch.linspace(-3.0, 3.0, 12).reshape(1, 3, 4)}
    program, message = _convert(module, x, path, overrides=False)
    assert program is None and failure in message
    assert converter_overrides.overrides_hint(message)
    program, message = _convert(module, x, path, overrides=True)
    assert program is not None, message
    _agrees(program, module, {"x": np.random.default_rng(0).standard_normal((1, 3, 4))
                              .astype(np.float32)})


class Multiply(torch.nn.Module):
    """``torch.multiply`` (ConvBERT's attention), ``torch.mul`` by another name."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.multiply(x, x.flip(-1)) + torch.multiply(x, 3.0)


def test_multiply_converts_as_mul() -> None:
    """On torch.export. (jit.trace records ``aten::multiply`` only in some graphs —
    ConvBERT's attention — and ``aten::mul`` in a module this small; the registration
    is one name for both frontends.)"""
    module, path = Multiply(), "export"
    x = {"x": torch.linspace(-3.0, 3.0, 12).reshape(3, 4)}
    program, message = _convert(module, x, path, overrides=False)
    assert program is None
    assert "NotImplementedError: Unsupported fx node multiply, kind multiply" in message
    assert converter_overrides.overrides_hint(message)
    program, message = _convert(module, x, path, overrides=True)
    assert program is not None, message
    _agrees(program, module, {"x": np.random.default_rng(4).standard_normal((3, 4))
                              .astype(np.float32)})


class ScalarOther(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.where(x > 0, x, -1.5)


def test_where_with_a_scalar_other_converts_on_torch_export() -> None:
    module = ScalarOther()
    x = {"x": torch.linspace(-2.0, 2.0, 10).reshape(2, 5)}
    program, message = _convert(module, x, "export", overrides=False)
    assert program is None and "kind where.scalarother" in message
    assert converter_overrides.overrides_hint(message)
    program, message = _convert(module, x, "export", overrides=True)
    assert program is not None, message
    assert "select" in {op.op_type for op in program.functions["main"].operations}
    _agrees(program, module, {"x": np.random.default_rng(1).standard_normal((2, 5))
                              .astype(np.float32)})


class EagerMask(torch.nn.Module):
    """transformers 5's eager attention mask: ``torch.where(mask, torch.zeros(()),
    min)`` over a boolean mask of run-time length, added to scores."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        keep = mask[:, None, None, :].bool().expand(x.shape[0], 1, x.shape[1], x.shape[1])
        bias = torch.where(keep, torch.zeros((), dtype=x.dtype), torch.finfo(x.dtype).min)
        return x.sum(-1)[:, None, :, None] + bias


def test_where_of_one_element_operands_is_declared_the_shape_of_its_condition() -> None:
    """jit.trace converts the mask to a ``select`` of two scalars, which MIL types as a
    scalar (its shape comes from the operands, not the condition) though it computes
    [1, 1, S, S]: every op after it is typed wrong, and the simulator refuses it."""
    module = EagerMask()
    example = {"x": torch.randn(1, 8, 4), "mask": torch.tensor([[1, 1, 1, 1, 1, 1, 0, 0]])}
    dynamic = {"x": {1: (2, 16)}, "mask": {1: (2, 16)}}
    inputs = {"x": np.random.default_rng(2).standard_normal((1, 5, 4)).astype(np.float32),
              "mask": np.array([[1, 1, 1, 0, 0]], np.int32)}
    # at coremltools' defaults aten::Int stops the trace path first (NumPy ≥ 2.4): the
    # defaults' program is that of coremltools' own ``where`` with only ``int`` cured
    converter_overrides.install()
    from coremltools.converters.mil.frontend.torch import ops

    converter_overrides._registry().set_func_by_name(ops.where, "where")
    source = TorchSource("test:module", module.eval(), example, dynamic_dims=dynamic)
    try:
        models, _ = convert_source(source, "fp32", paths=("trace",))
    finally:
        converter_overrides.uninstall()
    plain = models["trace"]._mil_program
    [select] = [op for op in plain.functions["main"].operations if op.op_type == "select"
                and op.name == "bias"]
    assert select.outputs[0].shape == ()
    with pytest.raises(SimError, match=r"produced shape \[1, 1, 5, 5\].*declares \[\]"):
        run_program(plain, inputs, "fp64")

    program, message = _convert(module, example, "trace", overrides=True, dynamic=dynamic)
    assert program is not None, message
    [select] = [op for op in program.functions["main"].operations if op.name == "bias"]
    assert len(select.outputs[0].shape) == 4
    _agrees(program, module, inputs)
    inputs = {"x": np.ones((1, 9, 4), np.float32), "mask": np.ones((1, 9), np.int32)}
    _agrees(program, module, inputs)

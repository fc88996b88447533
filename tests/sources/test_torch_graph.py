"""Torch's intermediates on each conversion path, named as the converted program names
them: every FX node of torch.export's program (floats widened to float64), and the
TorchScript values of jit.trace with a word for a debug name, each as it was produced."""

from __future__ import annotations

import numpy as np
import torch

from nebisect.sources.torch_graph import record_graph
from nebisect.sources.torch_module import TorchSource


class AdditiveMask(torch.nn.Module):
    """A bool padding mask made additive as ``nn.MultiheadAttention`` makes it, in place."""

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        zeros = torch.zeros_like(mask, dtype=torch.float32)
        additive = zeros.masked_fill_(mask, float("-inf"))
        return torch.softmax(x + additive, dim=-1)


X = np.array([[0.5, -1.0, 2.0, 0.25], [1.5, 0.0, -0.5, 3.0]], np.float32)
MASK = np.array([[0, 0, 1, 1], [0, 1, 1, 1]], np.int32)
ADDITIVE = np.where(MASK, -np.inf, 0.0)


def _source() -> TorchSource:
    return TorchSource("additive_mask", AdditiveMask().eval(),
                       {"x": torch.zeros(2, 4), "mask": torch.zeros(2, 4, dtype=torch.bool)})


def test_export_records_every_node_at_float64_under_its_fx_name() -> None:
    graph, values = record_graph(_source(), {"x": X, "mask": MASK}, "export", "fp64")
    assert [(n.name, n.op, n.inputs, n.mil) for n in graph.nodes] == [
        ("x", "input", (), "x"), ("mask", "input", (), "mask"),
        ("zeros_like", "zeros_like", ("mask",), "zeros_like"),
        ("masked_fill", "masked_fill", ("zeros_like", "mask"), "masked_fill"),
        ("add", "add", ("x", "masked_fill"), "add"), ("softmax", "softmax", ("add",), "softmax")]
    # the graph says float32; the reference's precision widens it
    assert {name: value.dtype for name, value in values.items()} == dict.fromkeys(
        ["zeros_like", "masked_fill", "add", "softmax"], np.dtype(np.float64))
    np.testing.assert_array_equal(values["masked_fill"], ADDITIVE)
    expected = np.exp(X.astype(np.float64) + ADDITIVE)
    np.testing.assert_allclose(values["softmax"], expected / expected.sum(-1, keepdims=True),
                               rtol=1e-15)


def test_trace_names_the_values_coremltools_names_and_keeps_each_as_produced() -> None:
    """``zeros.1`` is filled in place afterwards: recorded where it is produced, it is
    still zeros. A numeric debug name (``%12``) is renumbered by coremltools: unnamed."""
    graph, values = record_graph(_source(), {"x": X, "mask": MASK}, "trace", "fp64")
    named = {n.name: (n.op, n.mil) for n in graph.nodes if n.op != "input"}
    assert named["zeros.1"] == ("zeros_like", "zeros_1")
    assert named["zeros"] == ("masked_fill", "zeros")
    assert sorted(op for op, mil in named.values() if not mil) == ["add", "softmax"]
    assert sorted(values) == ["zeros", "zeros.1"]
    np.testing.assert_array_equal(values["zeros.1"], np.zeros((2, 4)))
    np.testing.assert_array_equal(values["zeros"], ADDITIVE)

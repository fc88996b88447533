"""Cutting exported torch graphs: units, submodule levels, bypass vs recorded inputs,
and generated modules that compute exactly what the nodes computed."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from support.bisect_programs import lgamma_net

from nebisect.mil.graph import ExtractionError
from nebisect.minimize.graphs.fx import FxGraph
from nebisect.sources.torch_load import load_torch_source
from nebisect.sources.torch_module import run_module


@pytest.fixture(scope="module")
def net_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return lgamma_net(tmp_path_factory.mktemp("fx"))


@pytest.fixture(scope="module")
def graph(net_path: str) -> FxGraph:
    return FxGraph(load_torch_source(net_path))


def run_candidate(location: str) -> np.ndarray:
    source = load_torch_source(location)
    return run_module(source.module, source.example_inputs)["output"]


def test_units_dependencies_and_levels(graph: FxGraph) -> None:
    assert graph.units == ("linear", "relu", "abs_1", "add", "lgamma", "linear_1", "relu_1",
                           "unsqueeze", "mul")
    assert graph.dag.consumes["mul"] == ("relu_1", "unsqueeze")
    assert graph.dag.consumes["unsqueeze"] == ("mask",)
    assert graph.dag.outputs == ("mul",)
    depth1, depth2 = graph.levels
    assert [depth1(u) for u in graph.units] == ["pre", "pre", "odd", "odd", "odd", "post",
                                                "post", "<top>", "<top>"]
    assert depth2("linear") == "pre.linear" and depth2("relu") == "pre"


def test_bypass_drops_submodules_where_shapes_allow(graph: FxGraph) -> None:
    candidate = graph.candidate(["lgamma"])
    # add, abs, relu, linear all keep (1, s, 8) float32: lgamma reads the model input
    assert list(candidate.inputs) == ["x"]
    assert candidate.dynamic_dims == {"x": {1: (1, 16)}}
    assert "torch.ops.aten.lgamma.default(x)" in candidate.forward
    assert candidate.weights == {}


def test_recorded_inputs_keep_dynamic_axes(graph: FxGraph, tmp_path: Path) -> None:
    candidate = graph.candidate(["lgamma", "linear_1"], bypass=False)
    assert list(candidate.inputs) == ["add"]
    assert candidate.dynamic_dims == {"add": {1: (1, 16)}}
    assert sorted(candidate.weights) == ["post_linear_bias", "post_linear_weight"]
    location = candidate.write(tmp_path / "cut", "test cut")
    expected = graph.recorded["linear_1"].numpy()
    np.testing.assert_array_equal(run_candidate(location), expected)


def test_whole_graph_round_trips(graph: FxGraph, net_path: str, tmp_path: Path) -> None:
    candidate = graph.candidate(graph.units)
    assert set(candidate.inputs) == {"x", "mask"}
    location = candidate.write(tmp_path / "all", "everything")
    original = load_torch_source(net_path)
    expected = run_module(original.module, original.example_inputs)["output"]
    np.testing.assert_allclose(run_candidate(location), expected, rtol=1e-6)


def test_multiple_outputs_and_travelling_sym_sizes(tmp_path: Path) -> None:
    source = tmp_path / "views.py"
    source.write_text(textwrap.dedent('''
        import torch

        class Views(torch.nn.Module):
            def forward(self, x):
                y = torch.tanh(x)
                z = y.reshape(x.shape[0], x.shape[1] * 2, -1)
                return z.sum(-1), y

        def model():
            return {"module": Views(), "example_inputs": {"x": torch.randn(2, 6, 4)},
                    "dynamic_dims": {"x": {1: (2, 32)}}}
    '''))
    graph = FxGraph(load_torch_source(f"{source}:model"))
    reshape = next(u for u in graph.units if u.startswith(("reshape", "view")))
    candidate = graph.candidate([reshape], bypass=False)
    # the reshape's size arithmetic on x.shape travels with it: x stays an input
    assert set(candidate.inputs) == {"tanh", "x"}
    assert "sym_size" in candidate.forward
    location = candidate.write(tmp_path / "cut", "reshape")
    loaded = load_torch_source(location)
    assert loaded.dynamic_dims == {"tanh": {1: (2, 32)}, "x": {1: (2, 32)}}
    out = run_module(loaded.module, loaded.example_inputs)["output"]
    np.testing.assert_array_equal(out, graph.recorded[reshape].numpy())
    both = graph.candidate(graph.units)
    assert both.forward.strip().splitlines()[-1].strip().startswith("return (")


def test_digest_is_content(graph: FxGraph) -> None:
    one = graph.candidate(["lgamma"]).digest()
    assert one == graph.candidate(["lgamma"]).digest()
    assert one != graph.candidate(["lgamma"], bypass=False).digest()
    assert one != graph.candidate(["lgamma", "linear_1"]).digest()


def test_errors(graph: FxGraph, tmp_path: Path) -> None:
    with pytest.raises(ExtractionError, match="empty"):
        graph.candidate([])
    source = tmp_path / "cond.py"
    source.write_text(textwrap.dedent('''
        import torch

        class Branchy(torch.nn.Module):
            def forward(self, x):
                return torch.cond(x.sum() > 0, lambda v: v + 1, lambda v: v - 1, (x,))

        def model():
            return {"module": Branchy(), "example_inputs": {"x": torch.randn(3)}}
    '''))
    with pytest.raises(ExtractionError, match="control flow"):
        FxGraph(load_torch_source(f"{source}:model"))

    class Unexportable(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return x.numpy()

    from nebisect.sources.torch_module import TorchSource

    with pytest.raises(ExtractionError, match=r"torch\.export failed"):
        FxGraph(TorchSource("inline", Unexportable().eval(), {"x": torch.randn(2)}))


def test_multi_output_op_and_its_getitems_are_one_unit(tmp_path: Path) -> None:
    source = tmp_path / "maxes.py"
    source.write_text(textwrap.dedent('''
        import torch

        class Maxes(torch.nn.Module):
            def forward(self, x):
                values, indices = torch.max(torch.tanh(x), dim=-1)
                return values * 2, indices

        def model():
            return {"module": Maxes(), "example_inputs": {"x": torch.randn(2, 6, 4)}}
    '''))
    graph = FxGraph(load_torch_source(f"{source}:model"))
    assert graph.units == ("tanh", "max_1", "mul")
    assert graph.unit_nodes["max_1"] == ["max_1", "getitem", "getitem_1"]
    assert graph.dag.produces["max_1"] == ("getitem", "getitem_1")
    assert graph.dag.consumes["mul"] == ("getitem",)
    alone = graph.candidate(["mul"], bypass=False)
    assert list(alone.inputs) == ["getitem"]  # a getitem value is fed, never the tuple
    cut = graph.candidate(["max_1"], bypass=False)
    loaded = load_torch_source(cut.write(tmp_path / "cut", "max"))
    outputs = run_module(loaded.module, loaded.example_inputs)
    np.testing.assert_array_equal(outputs["output_0"], graph.recorded["getitem"].numpy())
    np.testing.assert_array_equal(outputs["output_1"], graph.recorded["getitem_1"].numpy())

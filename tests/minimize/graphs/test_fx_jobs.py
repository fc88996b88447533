"""The exported graph held by an isolated child: the parent's records agree with the
graph itself, candidates cross the boundary unchanged, and the worker exports once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from support.bisect_programs import lgamma_net

from nebisect.arrays import save_npz
from nebisect.errors import NebisectError
from nebisect.isolate import Isolator
from nebisect.mil.graph import ExtractionError
from nebisect.minimize.graphs.fx import FxGraph
from nebisect.minimize.graphs.fx_jobs import IsolatedFxGraph
from nebisect.sources.torch_load import load_torch_source
from nebisect.sources.torch_module import to_torch_inputs

SUBSETS = [["lgamma"], ["lgamma", "linear_1"], ["relu", "mul"]]

#: Logs every export of its forward to LOG: one line per torch.export trace.
COUNTED_SOURCE = '''
import torch

LOG = {log!r}


class Lgamma(torch.nn.Module):
    def forward(self, x):
        if torch.compiler.is_exporting():
            with open(LOG, "a") as file:
                file.write("export\\n")
        return torch.lgamma(torch.relu(x) + 1.0)


def model():
    return {{"module": Lgamma(), "example_inputs": {{"x": torch.ones(1, 4)}}}}
'''


@pytest.fixture(scope="module")
def net_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return lgamma_net(tmp_path_factory.mktemp("fx-jobs"))


@pytest.fixture(scope="module")
def worker() -> Iterator[Isolator]:
    with Isolator("persistent") as isolator:
        yield isolator


def test_records_and_candidates_match_the_graph_in_process(net_path: str,
                                                           worker: Isolator) -> None:
    graph = FxGraph(load_torch_source(net_path))
    isolated = IsolatedFxGraph(net_path, None, label="net", isolator=worker, timeout=120)
    assert isolated.units == list(graph.units)
    assert [[level(u) for u in graph.units] for level in isolated.record.levels] == [
        [level(u) for u in graph.units] for level in graph.levels]
    assert isolated.record.targets["lgamma"] == "aten.lgamma.default"
    for units in SUBSETS:
        here, there = graph.candidate(units), isolated.candidate(units)
        assert there.digest() == here.digest()
        assert list(there.inputs) == list(here.inputs) and there.nodes == here.nodes
        assert there.dynamic_dims == here.dynamic_dims
    with pytest.raises(ExtractionError, match="empty set of nodes"):
        isolated.candidate([])


def test_recorded_values_come_from_the_given_inputs(net_path: str, worker: Isolator,
                                                    tmp_path: Path) -> None:
    loaded = load_torch_source(net_path)
    arrays = {name: np.full(tuple(value.shape), 0.5, np.float32)
              for name, value in loaded.example_inputs.items()}
    save_npz(tmp_path / "inputs.npz", arrays)
    graph = FxGraph(loaded, to_torch_inputs(loaded, arrays, torch.float32))
    isolated = IsolatedFxGraph(net_path, tmp_path / "inputs.npz", label="net",
                               isolator=worker, timeout=120)
    here, there = graph.candidate(["linear_1"]), isolated.candidate(["linear_1"])
    assert there.digest() == here.digest()
    assert there.digest() != FxGraph(loaded).candidate(["linear_1"]).digest()


def test_the_worker_exports_once_for_every_candidate(tmp_path: Path) -> None:
    log = tmp_path / "exports.log"
    source = tmp_path / "counted.py"
    source.write_text(COUNTED_SOURCE.format(log=str(log)))
    with Isolator("persistent") as isolator:
        graph = IsolatedFxGraph(f"{source}:model", None, label="counted", isolator=isolator,
                                timeout=120)
        for unit in graph.units:
            graph.candidate([unit])
    assert len(graph.units) == 3
    assert log.read_text().splitlines() == ["export"]


def test_a_candidate_over_the_array_limit_is_one_line(net_path: str, worker: Isolator,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The candidate's weights cross the boundary as arrays, bounded like any child's."""
    graph = IsolatedFxGraph(net_path, None, label="net.py:model", isolator=worker,
                            timeout=120)
    monkeypatch.setenv("NEBISECT_MAX_INPUT_BYTES", "100")
    with pytest.raises(NebisectError, match=r"^net.py:model: cutting the graph failed: .*"
                                            r"over the 100 bytes input limit"):
        graph.candidate(["lgamma", "linear_1"])

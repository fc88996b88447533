"""A program's outline and guided probes read in an isolated child are what the parent
would have computed in-process with coremltools (which ``run``'s process never imports)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.corpus_helpers import lse_package, softplus_package

from nebisect.case import SourceRef
from nebisect.errors import NebisectError
from nebisect.evaluate.programs import outline
from nebisect.inputs.guided import guided
from nebisect.inputs.probes import guided_probes
from nebisect.isolate import Isolator, Needs
from nebisect.mil.load import load_program
from nebisect.minimize.graphs.mil import MilGraph

SIMULATOR = Needs(("numpy", "coremltools"), blocks=("torch",))


@pytest.mark.parametrize("make", [lse_package, softplus_package])
def test_the_outline_is_the_graphs_dependency_view(make: object, tmp_path: Path,
                                                   isolator: Isolator) -> None:
    package = make(tmp_path / "p.mlpackage")  # type: ignore[operator]
    read = outline(SourceRef("mlpackage", str(package)), isolator=isolator,
                   needs=SIMULATOR, timeout=60)
    graph = MilGraph(load_program(package))
    assert read.dag.order == graph.dag.order and len(read.dag.order) >= 1
    assert read.dag.produces == graph.dag.produces
    assert read.dag.consumes == graph.dag.consumes
    assert (read.dag.inputs, read.dag.outputs) == (graph.dag.inputs, graph.dag.outputs)
    assert read.op_types == graph.op_types
    assert read.dag.frontier(0) == graph.dag.frontier(0)


def test_guided_probes_read_in_a_child_equal_the_in_process_ones(
        tmp_path: Path, isolator: Isolator) -> None:
    package = lse_package(tmp_path / "lse.mlpackage")
    probes = guided(SourceRef("mlpackage", str(package)), isolator=isolator,
                    needs=SIMULATOR, timeout=60)
    assert probes == guided_probes(load_program(package))
    [probe] = probes
    assert probe.op_type == "reduce_log_sum_exp"
    assert probe.boundary().label == "log(65504/32)"


def test_an_unreadable_package_is_one_line_naming_it(tmp_path: Path,
                                                      isolator: Isolator) -> None:
    broken = tmp_path / "broken.mlpackage"
    broken.mkdir()
    with pytest.raises(NebisectError, match=f"^{broken}: ") as raised:
        outline(SourceRef("mlpackage", str(broken)), isolator=isolator, needs=SIMULATOR,
                timeout=60)
    assert "\n" not in str(raised.value)

"""Intermediates of a Core ML run (coreml_inspect): which values are requested, that the
clone returns them under the names the simulator and the reducer use, when a clone is
not trusted, and first divergence over recorded device values. The real inspector runs
on macOS only (.github/workflows/macos.yml)."""

from __future__ import annotations

import asyncio
import platform
from pathlib import Path

import numpy as np
import pytest
from support import REPO
from support.bisect_programs import chain, lse_chain

from nebisect.mil.interp import run_program
from nebisect.mil.load import load_program
from nebisect.minimize.graphs.mil import MilGraph
from nebisect.oracle import value_divergence
from nebisect.search.divergence import first_divergence
from nebisect.targets.coreml_inspect import (
    inspectable_outputs,
    save_with_outputs,
    split_outputs,
    trusted_intermediates,
    unfaithful,
)
from nebisect.targets.spec import TargetSpec

ON_MAC = platform.system() == "Darwin"


def test_requested_values_are_every_non_const_op_output_in_program_order(
        tmp_path: Path) -> None:
    from coremltools.models.utils import load_spec

    package, _ = chain(tmp_path, 7)
    graph = MilGraph(load_program(package))
    names = inspectable_outputs(load_spec(str(package)))
    declared = set(graph.dag.outputs)
    expected = [v for u in graph.units for v in graph.dag.produces[u] if v not in declared]
    assert names == expected and "lse" in names and len(names) == 6


def test_clone_returns_the_intermediates_under_the_simulators_names(tmp_path: Path) -> None:
    package, _ = chain(tmp_path, 7)
    clone = tmp_path / "inspected.mlpackage"
    names = save_with_outputs(package, clone)
    feeds = lse_chain.chain_inputs()
    original = run_program(load_program(package), feeds, "fp16", intermediates=True)
    cloned = run_program(load_program(clone), feeds, "fp16").outputs
    own, middle = split_outputs(cloned, names, list(original.outputs))
    assert sorted(middle) == sorted([*names, *original.outputs])
    for name in middle:
        np.testing.assert_array_equal(middle[name], original.intermediates[name])
    assert unfaithful(original.outputs, own) == ""
    trusted, why = trusted_intermediates(cloned, names, original.outputs)
    assert why == "" and sorted(trusted) == sorted(middle)


def test_a_clone_computing_other_outputs_is_not_trusted() -> None:
    same = {"y": np.array([1.0, np.nan], np.float16)}
    assert unfaithful(same, {"y": same["y"].copy()}) == ""
    why = unfaithful(same, {"y": np.array([1.0, 0.0], np.float16)})
    assert why.startswith("intermediates not used") and "for y " in why
    assert "for y " in unfaithful(same, {})
    cloned = {"y": np.array([1.0, 0.0], np.float16), "mid": np.ones(2, np.float16)}
    assert trusted_intermediates(cloned, ["mid"], same) == ({}, why)


def test_first_divergence_over_recorded_device_values_finds_the_lse(tmp_path: Path) -> None:
    """The values a device returns for the clone (recorded here from sim:ane, which
    collapses the unshifted lse as the Neural Engine does) against sim:fp64."""
    package, _ = chain(tmp_path, 9)
    clone = tmp_path / "inspected.mlpackage"
    names = save_with_outputs(package, clone)
    feeds = lse_chain.chain_inputs()
    graph = MilGraph(load_program(package))
    recorded = run_program(load_program(clone), feeds, "fp16", profile="ane").outputs
    _, device = split_outputs(recorded, names, list(graph.dag.outputs))
    reference = run_program(load_program(package), feeds, "fp64", intermediates=True)
    diverges = value_divergence(device, reference.intermediates, "fp16")
    found = first_divergence(len(graph.dag.order),
                             lambda i: any(diverges(v) for v in graph.dag.frontier(i)))
    assert found.index is not None and graph.dag.order[found.index] == "lse"
    assert diverges("lse") == "mismatch:collapse"


@pytest.mark.macos
@pytest.mark.skipif(not ON_MAC, reason="MLModelInspector predicts with Core ML: macOS only "
                    "(runs in .github/workflows/macos.yml)")
def test_coreml_intermediates_equal_the_real_inspectors(tmp_path: Path) -> None:
    import coremltools as ct
    from coremltools.models.ml_program.experimental.debugging_utils import MLModelInspector

    from nebisect.sources.artifact import Artifact
    from nebisect.targets.registry import get_target

    package, _ = chain(tmp_path, 7)
    feeds = lse_chain.chain_inputs()
    ours = get_target("coreml:cpu").predict(Artifact("mlpackage", str(package), {}), feeds,
                                            intermediates=True)
    model = ct.models.MLModel(str(package), compute_units=ct.ComputeUnit.CPU_ONLY)
    inspector = MLModelInspector(model, compute_units=ct.ComputeUnit.CPU_ONLY)

    async def collect() -> dict[str, np.ndarray]:
        return {name: np.asarray(value) async for name, value in inspector.inspect(
            inputs=feeds, output_names=sorted(ours.intermediates)) if value is not None}

    theirs = asyncio.run(collect())
    assert sorted(theirs) == sorted(ours.intermediates) and "lse" in theirs
    for name, value in theirs.items():
        np.testing.assert_array_equal(ours.intermediates[name], value)


@pytest.mark.macos
@pytest.mark.macos_device
@pytest.mark.slow
def test_bisect_on_the_neural_engine_localizes_seed_000_by_first_divergence(
        tmp_path: Path) -> None:
    """Seed 000 on coreml:ne: the device's intermediates localize the collapsing lse
    without ddmin, and the repro asserts the lse runs on the Neural Engine."""
    from nebisect.arrays import save_npz
    from nebisect.executors.runner import Runner
    from nebisect.minimize.bisector import bisect_source
    from nebisect.minimize.options import BisectOptions

    inputs = tmp_path / "x8.npz"
    save_npz(inputs, {"x": np.full((1, 1, 8, 8), 8.0, np.float32)})
    with Runner(local=True) as runner:
        result = bisect_source(f"{REPO}/examples/logsumexp_ne.py:model",
                               BisectOptions(target=TargetSpec.parse("coreml:ne"),
                                             inputs=str(inputs)),
                               tmp_path / "out", runner)
    assert result.strategy.startswith("first-divergence"), result
    assert result.divergence_checks > 0 and "reduce_log_sum_exp" in result.kept_types
    assert "OP_OF_INTEREST = 'reduce_log_sum_exp'" in (tmp_path / "out" / "repro.py").read_text()

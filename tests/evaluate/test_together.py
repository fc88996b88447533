"""``sim:fp16`` and ``sim:ane`` judged in one child (:func:`nebisect.evaluate.judge.
evaluate_together`, asked by a run's workbench when both are its targets) give the
verdicts and the arrays of separate jobs, bit for bit, on the package zoo's transformers
and CNN and on a package the Neural Engine fails; a run with ``sim:ane`` alone judges
each cell in one job of its own, as it always did."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.corpus_helpers import lse_package
from support.package_zoo import build

from nebisect.case import PACKAGE, SourceRef
from nebisect.evaluate.judge import BESIDE
from nebisect.evaluate.workbench import Workbench
from nebisect.inputs.inputsets import base_input_sets
from nebisect.isolate import Isolator, Job, Outcome
from nebisect.isolation.timeouts import Timeouts
from nebisect.mil.plan import same_value
from nebisect.sources.artifact import Artifact
from nebisect.sources.resolve import resolve_source
from nebisect.targets.registry import get_target
from nebisect.targets.sim import predicting_together, shares_predictions
from nebisect.targets.spec import TargetSpec
from nebisect.verdict import Verdict

FP16, ANE = TargetSpec.parse("sim:fp16"), TargetSpec.parse("sim:ane")
#: fast recipes of the package zoo: three transformers and a CNN
ZOO = ("vit", "bert", "gpt2", "mobilenet_v2")


class CountingIsolator:
    """An isolator that keeps the jobs it ran."""

    def __init__(self, isolator: Isolator) -> None:
        self.isolator = isolator
        self.jobs: list[Job] = []

    def run(self, job: Job) -> Outcome:
        self.jobs.append(job)
        return self.isolator.run(job)


@pytest.fixture(scope="module")
def isolator() -> Any:
    with Isolator() as shared:
        yield shared


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("package_zoo")


def _package(name: str, packages: Path) -> Path:
    """The zoo's recipe ``name``, or the one-op log-sum-exp package (``lse``)."""
    if name != "lse":
        return build(name, packages)
    path = packages / "lse.mlpackage"
    return path if path.exists() else lse_package(path)


def _input_sets(bench: Workbench) -> list[str]:
    """The run's generated inputs, and the same with their floats scaled 40× (fp16
    overflows somewhere in most of these models: failing verdicts are compared too)."""
    generated = base_input_sets(bench.source, (8,), example=False)[0].arrays
    scaled = {name: value * 40 if value.dtype.kind == "f" else value
              for name, value in generated.items()}
    return list(dict.fromkeys([bench.save_inputs(generated), bench.save_inputs(scaled)]))


def _bench(package: Path, workdir: Path, isolator: Any,
           together: tuple[TargetSpec, ...]) -> Workbench:
    workdir.mkdir()
    source = resolve_source(str(package))
    return Workbench(source, workdir, isolator, source.reference, Timeouts(),
                     together=together)


def _comparable(verdict: Verdict) -> dict[str, Any]:
    """A verdict's JSON without its timings (the seconds differ from run to run)."""
    document = verdict.to_dict()
    document.pop("timings")
    return document


def _same(first: tuple[Verdict, dict[str, np.ndarray]],
          second: tuple[Verdict, dict[str, np.ndarray]]) -> None:
    assert _comparable(first[0]) == _comparable(second[0])
    assert first[1].keys() == second[1].keys() and first[1]
    for name, array in first[1].items():
        assert same_value(np.asarray(array), np.asarray(second[1][name])), name


@pytest.mark.parametrize("name", [*ZOO, "lse"])
def test_judged_together_as_apart(name: str, packages: Path, tmp_path: Path,
                                  isolator: Isolator) -> None:
    package = _package(name, packages)
    counting = CountingIsolator(isolator)
    together = _bench(package, tmp_path / "together", counting, (FP16, ANE))
    apart = _bench(package, tmp_path / "apart", isolator, ())
    npzs = _input_sets(together)
    if name == "lse":  # past log(65504 / 32): the Neural Engine's log-sum-exp collapses
        npzs = [together.save_inputs({"x": np.full((1, 32), x, np.float16)})
                for x in (1.0, 7.7)]
    statuses = set()
    for npz in npzs:
        for target in (FP16, ANE):
            shared = together.evaluate_cell(target, "", npz)
            _same(shared, apart.evaluate_cell(target, "", npz))
            assert BESIDE not in shared[0].job_result
            statuses.add((str(target), shared[0].status.value))
    assert len(counting.jobs) == len(npzs)  # both targets of an input set in one child
    if name == "lse":
        assert statuses == {("sim:fp16", "pass"), ("sim:ane", "pass"), ("sim:ane", "mismatch")}


@pytest.mark.parametrize("name", ZOO[:2])
def test_intermediates_predicted_together_are_those_predicted_apart(
        name: str, packages: Path, tmp_path: Path) -> None:
    package = _package(name, packages)
    source = resolve_source(str(package))
    inputs = base_input_sets(source, (8,), example=False)[0].arrays
    artifact = Artifact.of(SourceRef(PACKAGE, str(package)))
    fp16, ane = get_target("sim:fp16"), get_target("sim:ane")
    alone = [target.predict(artifact, inputs, intermediates=True) for target in (fp16, ane)]
    for first, second in ((0, 1), (1, 0)):
        targets = (fp16, ane)
        with predicting_together():
            shared = {index: targets[index].predict(artifact, inputs, intermediates=True)
                      for index in (first, second)}
        for index, prediction in shared.items():
            for part in ("outputs", "intermediates"):
                mine, theirs = getattr(prediction, part), getattr(alone[index], part)
                assert mine.keys() == theirs.keys() and mine
                assert all(same_value(np.asarray(v), np.asarray(theirs[k]))
                           for k, v in mine.items())


def test_a_run_with_the_neural_engine_alone_judges_each_cell_apart(
        packages: Path, tmp_path: Path, isolator: Isolator) -> None:
    package = _package("lse", packages)
    counting = CountingIsolator(isolator)
    alone = _bench(package, tmp_path / "alone", counting, (ANE,))
    apart = _bench(package, tmp_path / "apart", isolator, ())
    npz = alone.save_inputs({"x": np.full((1, 32), 7.7, np.float16)})
    verdict, arrays = alone.evaluate_cell(ANE, "", npz)
    _same((verdict, arrays), apart.evaluate_cell(ANE, "", npz))
    assert verdict.status == "mismatch"
    (job,) = counting.jobs
    assert not job.payload.get("beside")
    assert not any(name.startswith(BESIDE) for name in arrays)


def test_which_targets_share_predictions() -> None:
    spec = TargetSpec.parse
    assert shares_predictions(FP16, ANE) and shares_predictions(ANE, FP16)
    assert shares_predictions(spec("sim:fp16:spec"), spec("sim:ane:spec"))
    assert not shares_predictions(spec("sim:fp16:spec"), ANE)
    assert not shares_predictions(ANE, ANE)
    for other in ("sim:fp32", "sim:fp16-naive", "sim:fp64", "coreml:ne"):
        assert not shares_predictions(FP16, spec(other))

"""The package zoo as a gate: every recipe of ``zoo/packages/recipes.py`` run with
defaults, as a user runs a package they already have — no internal error, a report that
agrees with its exit code, and the judgment docs/zoo.md gives it."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.package_zoo import build, recipes, run_package
from support.zoo_runs import INTERNAL

#: the packages a default run must fail, and on what (docs/zoo.md's judgments); every
#: other recipe passes
FAILING = {"bert_finfo_mask": {"nonfinite"}, "bert_range": {"error"},
           "llama_kv_state": {"error"}, "unet_block": {"nonfinite", "tolerance"}}
#: the packages whose default run sets findings aside as margins (beyond 128× the
#: generated inputs), and the ops they name
MARGINS = {"resnet": {"conv"}, "running_sum_state": {"add"}, "wav2vec2": {"conv", "square"}}


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("package_zoo")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(recipes()))
def test_default_run(packages: Path, name: str) -> None:
    run = run_package(build(name, packages))
    assert run.code == (1 if name in FAILING else 0), run.stderr[-2000:]
    assert not any(text in run.stderr for text in INTERNAL), run.stderr[-2000:]
    reports = run.report.get("programs", [run.report])
    assert all(report["failed"] is bool(report["findings"]) for report in reports)
    symptoms = {f["symptom"] for report in reports for f in report["findings"]}
    assert symptoms == FAILING.get(name, set())
    margins = {f["op_type"] for report in reports for f in report.get("far_findings", [])}
    assert margins == MARGINS.get(name, set())

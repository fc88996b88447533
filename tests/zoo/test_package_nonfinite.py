"""A package whose every output is NaN is a failure, though its own float64 reference
"agrees" (it is the same program): a BERT-style mask ``(1 - m) × finfo(float32).min``
stored as fp16 ``-inf`` (it once passed, exit 0). The finding names the op where the
program's own values stop being finite and the constant it reads."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.package_zoo import build, run_package


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("package_zoo")


def test_nan_everywhere_is_one_finding_naming_the_mask_constant(packages: Path) -> None:
    run = run_package(build("bert_finfo_mask", packages))
    assert run.code == 1, run.stderr[-2000:]
    (finding,) = run.report["findings"]
    assert (finding["symptom"], finding["op_type"]) == ("nonfinite", "mul")
    culprits = {(g["culprit"]["op"], tuple(g["culprit"]["constants"]))
                for g in run.report["groups"]}
    assert len(culprits) == 1
    op, constants = culprits.pop()
    assert op.startswith("extended") and len(constants) == 1 and constants[0].endswith("= -inf")
    assert "inf/NaN" in finding["message"] and "own float64 evaluation" in finding["message"]
    # lint reads the same hazard off the program: the run prints it as the explanation
    (hazard,) = run.report["hazards"]
    assert hazard["rule_id"] == "fp16-inf-mask" and f"'{op}'" in hazard["message"]


def test_finite_packages_still_pass(packages: Path) -> None:
    run = run_package(build("token_ids", packages))
    assert run.code == 0 and run.report["hazards"] == []

"""The package zoo (``zoo/packages/recipes.py``) for tests: each package built once per
test session, in a temporary folder, and ``nebisect run`` on it as a user types it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from support import REPO
from support.zoo_runs import INTERNAL, ZooRun

RECIPES_FILE = REPO / "zoo" / "packages" / "recipes.py"


def recipes() -> dict[str, Any]:
    """The zoo's recipes, by name."""
    spec = importlib.util.spec_from_file_location("package_zoo_recipes", RECIPES_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.RECIPES)


def build(name: str, out: Path) -> Path:
    """Package ``name`` built in ``out`` (once: a second call reuses it)."""
    path = out / f"{name}.mlpackage"
    if not path.exists():
        from nebisect.mil.quiet import quiet

        with quiet():
            built = recipes()[name](out)
        assert built == path, (built, path)
    return path


def run_package(package: Path, *extra: str, timeout: float = 600) -> ZooRun:
    """``nebisect run PACKAGE --json`` with ``extra`` options."""
    done = subprocess.run([sys.executable, "-m", "nebisect", "run", str(package), "--json",
                           *extra], capture_output=True, text=True, timeout=timeout, cwd=REPO)
    report = json.loads(done.stdout) if done.returncode in (0, 1) else {}
    return ZooRun(done.returncode, report, done.stderr)


#: the packages a default run must fail, and on what (docs/zoo.md's judgments); every
#: other recipe passes
FAILING = {"bert_finfo_mask": {"nonfinite"}, "bert_range": {"error"},
           "llama_kv_state": {"error"}, "unet_block": {"nonfinite", "tolerance"}}
#: the packages whose default run sets findings aside as margins (beyond 128× the
#: generated inputs), and the ops they name
MARGINS = {"resnet": {"conv"}, "running_sum_state": {"add"}, "wav2vec2": {"conv", "square"}}


def check_default_run(packages: Path, name: str) -> None:
    """``run`` with defaults on recipe ``name``, judged as docs/zoo.md judges it."""
    run = run_package(build(name, packages))
    assert run.code == (1 if name in FAILING else 0), run.stderr[-2000:]
    assert not any(text in run.stderr for text in INTERNAL), run.stderr[-2000:]
    reports = run.report.get("programs", [run.report])
    assert all(report["failed"] is bool(report["findings"]) for report in reports)
    symptoms = {f["symptom"] for report in reports for f in report["findings"]}
    assert symptoms == FAILING.get(name, set())
    margins = {f["op_type"] for report in reports for f in report.get("far_findings", [])}
    assert margins == MARGINS.get(name, set())


#: every recipe, by name (the gate's two files run a half each)
NAMES = sorted(recipes())

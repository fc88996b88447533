"""Token ids into an Embedding(100), as users ship them (fixed length, ``RangeDim``,
``EnumeratedShapes``): a default run feeds ids inside the table the graph indexes, says
so, and finds nothing (these packages once got id 999 from nebisect itself, blamed on
precision)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO
from support.package_zoo import build, run_package


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("package_zoo")


@pytest.mark.parametrize("name", ["token_ids", "token_ids_range", "token_ids_enumerated"])
def test_ids_stay_inside_the_table(packages: Path, name: str) -> None:
    run = run_package(build(name, packages))
    assert run.code == 0, run.report.get("findings") or run.stderr[-2000:]
    (role,) = run.report["input_roles"]
    assert (role["name"], role["role"], role["op_type"], role["lo"], role["hi"]) == (
        "ids", "indices", "gather", 0.0, 99.0)
    judged = [r for r in run.report["rows"] if r["role"] == "target"]
    assert judged and all(r["verdict"]["status"] == "pass" for r in judged)
    explored = run.report["explorations"]["sim:ane"]["families"]
    assert explored["tokens"]["predictions"] == 4


def test_the_report_says_what_it_inferred(packages: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "nebisect", "run",
                           str(build("token_ids", packages))], capture_output=True, text=True,
                          timeout=600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("input read off the graph: ids: ids in [0, 99] — gather" in done.stdout
            and "indexes a 100-row table" in done.stdout), done.stdout


def test_a_declared_domain_wins(packages: Path) -> None:
    run = run_package(build("token_ids", packages), "--input-range", "ids=0:9")
    assert run.code == 0 and run.report["input_roles"] == []

"""``nebisect bisect`` as a user runs it: output directory, JSON, the live line on stderr,
one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO
from support.bisect_programs import chain

NEBISECT = [sys.executable, "-m", "nebisect"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NEBISECT, *args], capture_output=True, text=True, cwd=REPO,
                          timeout=900)


@pytest.fixture(scope="module")
def chain40(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return chain(tmp_path_factory.mktemp("chain"), 40)


def test_mlpackage_to_json_summary(chain40: tuple[Path, Path], tmp_path: Path) -> None:
    package, inputs = chain40
    out = tmp_path / "out"
    run = cli("bisect", str(package), "--target", "sim:ane", "--inputs", str(inputs),
              "--out", str(out), "--json")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["kept"] == ["lse"] and summary["evaluations"] == 2
    assert json.loads((out / "summary.json").read_text()) == summary
    assert "40 ops → 1 ops, 2 evaluations" in run.stderr  # the live line, last state


@pytest.mark.parametrize(("args", "message"), [
    (["--stage", "load"], "unknown stage 'load'"),
    (["--target", "sim:npu"], "unknown target 'sim:npu'"),
    (["--max-evals", "0"], "--max-evals 0: give at least 1"),
])
def test_usage_errors_are_one_line_exit_2(chain40: tuple[Path, Path], args: list[str],
                                          message: str, tmp_path: Path) -> None:
    package, _ = chain40
    target = [] if "--target" in args else ["--target", "sim:ane"]
    run = cli("bisect", str(package), *target, *args, "--out", str(tmp_path))
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert lines[-1].startswith("nebisect: error: ") and message in lines[-1]
    assert "Traceback" not in run.stderr

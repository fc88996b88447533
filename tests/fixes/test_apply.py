"""``nebisect fix apply`` and ``fix list``: packages and torch sources, in isolation."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from support.corpus_helpers import lse_package

from nebisect.mil.load import load_program

NEBISECT = str(Path(sys.executable).parent / "nebisect")

SOFTPLUS_SOURCE = '''
import torch


class Softplus(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.softplus(x) * 2.0


def model():
    return {"module": Softplus(), "example_inputs": {"x": torch.zeros(1, 8)}}
'''


def op_types(package: Path) -> Counter[str]:
    program = load_program(package)
    return Counter(op.op_type for op in program.functions["main"].operations
                   if op.op_type != "const")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([NEBISECT, "fix", *args], capture_output=True, text=True, timeout=600)


def test_fix_list_names_every_fix_with_its_level() -> None:
    rows = {r["name"]: r for r in json.loads(run("list", "--json").stdout)}
    assert rows["converter-compat"]["level"] == "convert"
    assert rows["meanpool-static-shape"]["cures"] == [
        "error:predict:*Invalid blob shape*", "crash:SIGSEGV"]
    assert len(rows) == 6


def test_apply_to_a_package(tmp_path: Path) -> None:
    source = lse_package(tmp_path / "lse.mlpackage")
    out = tmp_path / "fixed.mlpackage"
    done = run("apply", "logsumexp-max-shift", "softplus-stable", "converter-compat",
               str(source), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "logsumexp-max-shift: 1 rewrite(s)" in done.stdout
    assert "softplus-stable: no match" in done.stdout
    assert "converter-compat: not applicable (source is already converted)" in done.stdout
    assert op_types(out) == {"reduce_max": 1, "sub": 1, "reduce_log_sum_exp": 1, "add": 1}
    assert op_types(source) == {"reduce_log_sum_exp": 1}


def test_apply_to_a_torch_source_converts_then_rewrites(tmp_path: Path) -> None:
    (tmp_path / "softplus.py").write_text(SOFTPLUS_SOURCE)
    out = tmp_path / "fixed.mlpackage"
    done = run("apply", "softplus-stable", f"{tmp_path / 'softplus.py'}:model", "-o", str(out))
    assert done.returncode == 0, done.stderr
    types = op_types(out)
    assert "softplus" not in types and types["relu"] == 1 and types["exp"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope", "x.mlpackage"], "unknown fix 'nope'"),
        (["softplus-stable"], "give at least one fix name and a source"),
        (["softplus-stable", "missing.mlpackage"], "missing.mlpackage: no such file"),
    ],
)
def test_apply_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    done = run("apply", *args, "-o", str(tmp_path / "out.mlpackage"))
    assert done.returncode == 2 and message in done.stderr
    assert "Traceback" not in done.stderr
    wrong = run("apply", "softplus-stable", "x.mlpackage", "-o", str(tmp_path / "out.bin"))
    assert wrong.returncode == 2 and "must end in .mlpackage" in wrong.stderr

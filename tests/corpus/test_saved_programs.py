"""A corpus case stores a saved torch program (``.pt2``, TorchScript) as it stores a
package or a factory: copied in, content-hashed, replayed from the copy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from support import REPO


class Lse(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(x, dim=1, keepdim=True)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nebisect", *args], capture_output=True,
                          text=True, timeout=600, cwd=REPO)


@pytest.mark.slow
def test_a_saved_exported_program_is_a_case_that_replays_and_is_hashed(tmp_path: Path) -> None:
    program = tmp_path / "lse.pt2"
    torch.export.save(torch.export.export(Lse(), (torch.ones(1, 32),)), str(program))
    inputs = tmp_path / "x.npz"
    np.savez(inputs, x=np.full((1, 32), 7.7, np.float32))
    corpus = tmp_path / "corpus"
    added = _cli("corpus", "add", str(corpus), str(program), "-t", "sim:ane",
                 "--inputs", str(inputs))
    assert added.returncode == 0, added.stderr
    [case] = [d for d in corpus.iterdir() if d.is_dir()]
    assert sorted(p.name for p in case.iterdir()) == ["case.json", "inputs.npz", "model.pt2"]
    record = json.loads((case / "case.json").read_text())
    assert record["source_kind"] == "torch" and record["factory"] == ""
    assert record["expected"]["signature"] == "mismatch:collapse"
    replayed = _cli("replay", str(corpus), "--json")
    assert replayed.returncode == 0, replayed.stderr
    assert [r["outcome"] for r in json.loads(replayed.stdout)["results"]] == ["ok"]
    stored = case / "model.pt2"
    stored.write_bytes(stored.read_bytes() + b"tampered")
    damaged = _cli("replay", str(corpus), "--json")
    assert damaged.returncode == 1
    [problem] = json.loads(damaged.stdout)["problems"]
    assert problem["damaged"] and "model.pt2" in problem["reason"]

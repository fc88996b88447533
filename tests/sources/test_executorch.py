"""ExecuTorch programs: each Core ML delegate of a ``.pte`` runs as a package source.

The program is lowered here, on Linux, with ExecuTorch's own Core ML partitioner (the
``executorch`` wheel converts through coremltools); seed 000's model, so the delegate's
package must show seed 000's collapse on sim:ane.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from support import REPO

import nebisect
from nebisect.errors import NebisectError

pytest.importorskip("executorch.exir")


def _seed000() -> torch.nn.Module:
    """examples/logsumexp_ne.py's model, loaded by path."""
    spec = importlib.util.spec_from_file_location("logsumexp_ne", REPO / "examples" /
                                                  "logsumexp_ne.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.M().eval()


@pytest.fixture(scope="module")
def pte(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from executorch.backends.apple.coreml.partition import CoreMLPartitioner
    from executorch.exir import to_edge_transform_and_lower

    example = (torch.full((1, 1, 8, 8), 2.5),)
    program = torch.export.export(_seed000(), example)
    lowered = to_edge_transform_and_lower(program, partitioner=[CoreMLPartitioner()])
    path = tmp_path_factory.mktemp("pte") / "seed000.pte"
    path.write_bytes(lowered.to_executorch().buffer)
    return path


def test_each_core_ml_delegate_of_a_pte_runs_as_a_package(pte: Path, tmp_path: Path) -> None:
    inputs = tmp_path / "x.npz"
    np.savez(inputs, x=np.full((1, 1, 8, 8), 7.7, np.float32))
    issue = tmp_path / "issue.md"
    done = subprocess.run([sys.executable, "-m", "nebisect", "run", str(pte), "--json",
                           "--explore", "none", "--inputs", str(inputs), "-t", "sim:ane",
                           "--markdown", str(issue)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert document["source"] == str(pte)
    [program] = document["programs"]
    assert program["source"].endswith("model.mlpackage")
    assert [r["verdict"]["signature"] for r in program["rows"]] == ["mismatch:collapse"]
    assert program["findings"][0]["op_type"] == "reduce_log_sum_exp"
    # --markdown: each delegate's issues under a heading naming it
    lines = issue.read_text().splitlines()
    assert lines[:3] == ["# Core ML delegate 1 of 1 of seed000.pte", "",
                         "# nebisect run model.mlpackage: 1 finding"]
    assert "- **Culprit op:** `reduce_log_sum_exp`" in "\n".join(lines)


def test_a_file_that_is_not_an_executorch_program_is_one_line(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.pte"
    bogus.write_bytes(b"not a flatbuffer at all")
    with pytest.raises(NebisectError, match="not an ExecuTorch program"):
        nebisect.run(str(bogus), progress=False)
    done = subprocess.run([sys.executable, "-m", "nebisect", "run", str(bogus)],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "not an ExecuTorch program" in done.stderr

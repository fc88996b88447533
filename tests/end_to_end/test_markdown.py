"""``run --markdown FILE``: a ready upstream issue per finding, whose repro shows the bug.

std's lost Bessel correction (``examples/found/std_default_unbiased.py``) is a
conversion bug at any input: the run writes its issue, and the script inside it, run
alone in a fresh interpreter, converts the module and sees the program's std differ
from torch's. Off macOS the script predicts on nebisect's simulator, which it imports
only for that (``PYTHONPATH``: this checkout).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

PYTHON_FENCE = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nebisect", "run", *args, "--explore", "none",
                           "-t", "sim:fp32"], capture_output=True, text=True, cwd=REPO,
                          timeout=600, check=False)


@pytest.mark.slow
def test_the_issue_of_a_conversion_bug_carries_a_repro_that_shows_it(tmp_path: Path) -> None:
    issue = tmp_path / "issue.md"
    done = _run("examples/found/std_default_unbiased.py:model", "--markdown", str(issue))
    assert done.returncode == 1, done.stderr
    text = issue.read_text()
    assert text.startswith("# nebisect run std_default_unbiased.py:model: 1 finding\n")
    assert [line for line in text.splitlines() if line.startswith("##")] == [
        "## 1. conversion: sqrt is off beyond tolerance in fp32, fp64 at seeded random inputs "
        "(torch.export and jit.trace)", "### What happens", "### Numbers", "### Repro"]
    assert re.search(r"^\*\*Versions:\*\* coremltools 9\.0 · torch 2\.13\.\S+ · numpy ", text,
                     re.MULTILINE)
    assert "- **Culprit op:** `sqrt` (`sqrt_0`)" in text
    assert "| `sim:fp32` | torch.export, jit.trace | seeded random inputs | `output` | " \
           "0.953886519 | 0.950063348 | 0.00382 |" in text
    assert str(tmp_path) not in text and "/tmp/" not in text
    (script,) = PYTHON_FENCE.findall(text)
    assert "SETUP = []" in script and "from examples" not in script
    repro = tmp_path / "elsewhere" / "repro.py"
    repro.parent.mkdir()
    repro.write_text(script)
    shown = subprocess.run([sys.executable, str(repro)], capture_output=True, text=True,
                           cwd=repro.parent, timeout=600, check=False,
                           env={**os.environ, "PYTHONPATH": str(REPO)})
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert ("observed: mismatch:tolerance\n"
            "          tolerance at 1/1 elements, e.g. output[]: output 0.950063 vs "
            "reference 0.953887\n"
            "expected: mismatch:tolerance\nREPRODUCED\n") in shown.stdout


@pytest.mark.slow
def test_a_run_without_findings_writes_that_nothing_was_found(tmp_path: Path) -> None:
    source = tmp_path / "twice.py"
    source.write_text("import torch\n\n\nclass Twice(torch.nn.Module):\n"
                      "    def forward(self, x):\n        return x * 2\n\n\n"
                      "def model():\n    return {'module': Twice(), "
                      "'example_inputs': {'x': torch.ones(2, 3)}}\n")
    issue = tmp_path / "issue.md"
    done = _run(f"{source}:model", "--markdown", str(issue))
    assert done.returncode == 0, done.stderr
    lines = issue.read_text().splitlines()
    assert lines[0] == "# nebisect run twice.py:model: no finding"
    assert lines[-1] == ("Every target agreed with the reference on every input set the run "
                         "evaluated: there is no issue to report.")

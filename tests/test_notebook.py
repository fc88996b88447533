"""examples/notebook.ipynb runs headless, and says what it promises.

It is executed cell by cell in a fresh Jupyter kernel (nbclient), as a user would run
it: seed 000's cliff found from a module defined in the notebook, a segfaulting predict
and a segfaulting ``forward`` as verdicts while the kernel lives on; the outputs carry
no terminal escape codes.
"""

from __future__ import annotations

import pytest
from support import REPO

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

NOTEBOOK = REPO / "examples" / "notebook.ipynb"


def _text(cell: dict) -> str:
    parts = []
    for output in cell.get("outputs", []):
        parts.append(output.get("text", ""))
        data = output.get("data", {})
        parts.extend(str(data.get(kind, "")) for kind in ("text/plain", "text/html"))
    return "".join(parts)


@pytest.mark.slow
def test_the_notebook_finds_the_cliff_and_outlives_two_segfaults() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=900, kernel_name="python3",
                                     resources={"metadata": {"path": str(NOTEBOOK.parent)}})
    client.execute()
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    outputs = [_text(cell) for cell in code]
    assert not any(o.get("output_type") == "error" for c in code for o in c.get("outputs", []))
    assert "(7.62109375, 7.625)" in outputs[2]
    assert "reduce_log_sum_exp collapses" in outputs[2]
    assert 'class="nebisect-report"' in outputs[1]
    assert "nebisect: done in" in outputs[1]  # the progress line, replaced when done
    assert "sim:segv-demo" in outputs[3] and "crash:SIGSEGV" in outputs[3]
    assert "sim:fp32       export  pass" in outputs[3]
    assert "killed by SIGSEGV while exporting (torch.export)" in outputs[4]
    assert "killed by SIGSEGV while tracing (jit.trace)" in outputs[4]
    assert "in forward" in outputs[4]
    assert outputs[3].count("kernel alive: True") == 1
    assert outputs[4].count("kernel alive: True") == 1
    assert all("\x1b[" not in output for output in outputs)

"""A model that pins float32 is judged against torch in float32, said once (issue 44,
item 2): diffusers' ``timesteps.float()`` beside float64 weights made the float64
reference fail, and nothing was judged."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from support import SUPPORT

NEBISECT = [sys.executable, "-m", "nebisect"]
BLOCK = f"{SUPPORT}/timestep_block.py:model"


def _run(*extra: str) -> tuple[int, dict]:
    done = subprocess.run([*NEBISECT, "run", BLOCK, "--json", *extra],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.mark.parametrize(("target", "code"), [("sim:fp16", 1), ("sim:fp32", 0)])
def test_a_float32_pin_is_judged_against_torch_in_float32(target: str, code: int) -> None:
    """The embedding's cos/sin of t = 981 lose 0.3 in fp16 (the frequencies stored as
    fp16 constants, times 981): a precision finding at the example; fp32 passes within
    fp16's ULPs of torch fp32."""
    returncode, report = _run("-t", target, "--convert", "export", "--budget", "1")
    assert returncode == code
    assert report["reference"] == "torch:cpu:fp32" and not report["reference_failed"]
    assert report["reference_note"].startswith(
        "torch cannot compute this model in float64 (mat1 and mat2 must have the same "
        "dtype, but got Float and Double: it pins float32); judged against torch:cpu:fp32")
    judged = [r for r in report["rows"] if r["target"] == target]
    assert judged and all(r["verdict"]["status"] in ("pass", "mismatch") for r in judged)
    if code:
        [finding] = report["findings"]
        assert (finding["attribution"], finding["symptom"]) == ("precision", "tolerance")
        assert finding["smallest"]["label"] == "example"


def test_a_reference_the_user_names_is_never_replaced() -> None:
    """``--reference torch:cpu:fp64`` asks for float64: its failure stays the run's."""
    returncode, report = _run("-t", "sim:fp32", "--convert", "export", "--explore", "none",
                              "--reference", "torch:cpu:fp64")
    assert returncode == 1 and report["reference_failed"]
    assert "reference_note" not in report

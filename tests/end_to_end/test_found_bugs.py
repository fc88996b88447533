"""Converter bugs the atlas found, rebuilt as models in ``examples/found/``: ``run`` finds each.

Each module's docstring says where the atlas found it (op and OpInfo sample, or the
pattern campaign's program), what coremltools 9.0 emits, and why we believe it is not
reported upstream. ``run`` with the factory's own example inputs (``--explore none``)
must report the failure with the attribution and on the conversion paths the docstring
states.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from support import REPO

#: (status, signature prefix, attribution) per conversion path of the sim:fp32 rows
EXPECTED: dict[str, dict[str, tuple[str, str, str]]] = {
    "std_default_unbiased": {
        "export": ("mismatch", "mismatch:tolerance", "conversion"),
        "trace": ("mismatch", "mismatch:tolerance", "conversion")},
    "clamp_reversed_bounds": {
        "export": ("mismatch", "mismatch:tolerance", "conversion"),
        "trace": ("mismatch", "mismatch:tolerance", "conversion")},
    "rmsnorm_default_eps_export": {
        "export": ("error", "error:convert:torch.export: ValueError: node rms_norm", "conversion"),
        "trace": ("pass", "pass", "")},
    # no path converts: the rows are the conversion's, on no path ("")
    "group_norm_after_expand_export": {
        "": ("error", "error:convert:torch.export: TypeError: cannot determine truth value "
             "of Relational", "conversion")},
    "adaptive_pool1d_flexible_batch": {
        "": ("error", "error:convert:torch.export: ValueError: Cannot add const [is5N, N, N] "
             "| jit.trace: ValueError: Cannot add const [is5N, N, N]", "conversion")},
}


def _run(name: str) -> tuple[int, dict[str, Any]]:
    command = [sys.executable, "-m", "nebisect", "run", f"examples/found/{name}.py:model",
               "--json", "--explore", "none", "--target", "sim:fp32"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=600,
                          check=False)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_run_finds_what_the_atlas_found(name: str) -> None:
    code, report = _run(name)
    assert code == 1
    rows = {row["path"]: row for row in report["rows"] if row["target"] == "sim:fp32"}
    assert sorted(rows) == sorted(EXPECTED[name])
    for path, (status, signature, attribution) in EXPECTED[name].items():
        verdict = rows[path]["verdict"]
        assert verdict["status"] == status, (path, verdict)
        assert verdict["signature"].startswith(signature), (path, verdict["signature"])
        assert rows[path]["attribution"] == attribution, (path, rows[path])


@pytest.mark.slow
def test_a_converter_bug_does_not_swallow_an_fp16_overflow_of_its_own() -> None:
    """``x.std()``'s wrong divisor is the converter's (the exact program is off at every
    input); the fp16 overflow of its sum of squares at |x| ≈ 129 is not — the exact
    program computes it finite, so it is precision's, a finding of its own at ``square``
    (it was merged into the conversion finding, titled "sqrt returns inf/NaN")."""
    command = [sys.executable, "-m", "nebisect", "run",
               "examples/found/std_default_unbiased.py:model", "--json", "--target", "sim:fp16",
               "--families", "normal"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=900,
                          check=False)
    assert done.returncode == 1, done.stderr
    findings = json.loads(done.stdout)["findings"]
    assert [(f["attribution"], f["op_type"], f["symptom"]) for f in findings] == [
        ("precision", "square", "nonfinite"), ("conversion", "sqrt", "tolerance")]


@pytest.mark.slow
def test_int32_ids_padded_through_fp16_come_back_rounded() -> None:
    """``F.pad`` of int32 ids is a cast to fp16 and a float pad: the example's 2049 and
    the vocabulary's last id (explored) come back as other integers on both paths."""
    command = [sys.executable, "-m", "nebisect", "run",
               "examples/found/pad_int32_through_fp16.py:model", "--json", "--target",
               "sim:fp16"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=600,
                          check=False)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    [finding] = report["findings"]
    assert (finding["attribution"], finding["symptom"], finding["paths"]) == (
        "conversion", "integer", ["export", "trace"])
    wrong = {(row["input_set"]["label"], row["path"]): row["verdict"]["metrics"]
             ["comparisons"][0] for row in report["rows"]
             if row["target"] == "sim:fp16" and row["verdict"]["status"] == "mismatch"}
    example = wrong[("example", "export")]
    assert (example["worst_reference"], example["worst_output"]) == (2049.0, 2048.0)

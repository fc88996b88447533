"""A precision finding judged against torch at the same precision (issue 44, item 4):
the model's own conditioning is a note, Core ML far worse than torch stays a finding and
says by how much."""

from __future__ import annotations

import json
import math
import os
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import REPO, SUPPORT
from support.conditioning_models import BELOW_FP16, CONSTANT

from nebisect.arrays import save_npz
from nebisect.detect.findings import Row
from nebisect.detect.matrix import RunReport
from nebisect.detect.same_precision import (
    AS_BAD_FACTOR,
    TorchPeer,
    compared_inputs,
    error_ratio,
    note_line,
    worst_pair,
)
from nebisect.search.records import Culprit, FailureGroup
from nebisect.search.space import Member
from nebisect.verdict import Comparison, Verdict

NEBISECT = [sys.executable, "-m", "nebisect"]
MODELS = f"{SUPPORT}/conditioning_models.py"


def _compared(kind: str, ulps: float, error: float) -> Comparison:
    return Comparison("output", passed=not kind, kind=kind, max_ulp_error=ulps,
                      max_abs_error=error)


def test_the_error_ratio_in_ulps_of_one_precision() -> None:
    """inf/NaN measures no error: both → 1, only torch → 0, only the program → ∞."""
    nonfinite, off = _compared("nonfinite", 0, 0), _compared("tolerance", 300, 0.3)
    assert error_ratio(off, _compared("tolerance", 100, 0.1)) == 3.0
    assert error_ratio(nonfinite, _compared("nonfinite", 0, 0)) == 1.0
    assert error_ratio(off, nonfinite) == 0.0
    assert error_ratio(nonfinite, _compared("", 0.4, 1e-4)) == math.inf
    assert error_ratio(off, _compared("", 0, 0)) == math.inf


def test_the_largest_errors_are_set_side_by_side() -> None:
    """A cliff's edge (Core ML just over, torch under) weighs less than deeper in."""
    edge = (_compared("tolerance", 60, 8.7e-5), _compared("", 10, 1.4e-5))
    deep = (_compared("tolerance", 4e4, 0.064), _compared("tolerance", 1.7e4, 0.027))
    program, peer = worst_pair([edge, deep])
    assert (program.max_abs_error, peer.max_abs_error) == (0.064, 0.027)
    # an inf/NaN torch does not share decides, wherever it is
    unshared = (_compared("nonfinite", 0, 0), _compared("", 1, 1e-3))
    assert worst_pair([deep, unshared]) == unshared


def test_the_inputs_compared_are_the_trigger_then_the_largest() -> None:
    members = [Member("const", f"const(x={x})", x, x) for x in (1e-3, 0.5, 1.0, 2e-3)]
    grouped = FailureGroup("sim:fp32", "export", "mismatch:tolerance", "precision", None,
                           members[0], members=members)
    assert compared_inputs(grouped) == ["const(x=0.001)", "const(x=1.0)", "const(x=0.5)",
                                        "const(x=0.002)"]


def _group_row(member: Member, target: str = "sim:fp16",
               signature: str = "mismatch:tolerance", attribution: str = "precision") -> Row:
    status = signature.partition(":")[0]
    return Row(target, 0, Verdict(status, "predict", signature), attribution, path="export",
               input_set=member, culprit=Culprit("sub_0", "sub", signature, "intermediates"),
               explored=True)


def _peer(member: Member, program: Comparison, peer: Comparison,
          target: str = "sim:fp16") -> TorchPeer:
    return TorchPeer(target, "export", "mismatch:tolerance", [member.label], "torch:cpu:fp16",
                     "fp16", program, peer)


def _report(rows: list[Row], peers: list[TorchPeer]) -> RunReport:
    example = Member("example", "example", None, 1.0)
    report = RunReport("model.py:model", "torch:cpu:fp64",
                       rows=[Row("sim:fp16", 0, Verdict("pass", "predict"), path="export",
                                 input_set=example), *rows],
                       undeclared=["x"], input_scale=1.0, torch_peers=peers)
    report.regroup()
    return report


def test_a_precision_finding_torch_shares_is_a_note_not_a_failure() -> None:
    member = Member("const", "const(x=0.5)", 0.5, 0.5)
    peer = _peer(member, _compared("tolerance", 300, 0.03), _compared("tolerance", 100, 0.01))
    report = _report([_group_row(member)], [peer])
    assert report.findings == [] and not report.failed
    (note,) = report.shared_with_torch
    assert note_line(note, report.torch_peers) == (
        f"note: {note.title} — torch fp16 computes it as badly: max error 0.01 vs Core ML's "
        "0.03 at its trigger (3× in fp16 ULPs); the model's own conditioning at this "
        "precision, not a failure")
    again = RunReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert again.to_dict() == report.to_dict() and not again.failed
    assert again.torch_peers[0].ratio == 3.0 < AS_BAD_FACTOR


def test_worse_than_torch_or_not_all_precision_stays_a_finding() -> None:
    member = Member("const", "const(x=0.5)", 0.5, 0.5)
    worse = _peer(member, _compared("tolerance", 5e4, 3.26), _compared("", 19, 1.25e-3))
    (finding,) = _report([_group_row(member)], [worse]).findings
    assert finding.title.endswith(
        "; 2,632× torch fp16's error (max error 0.00125 vs Core ML's 3.26 at its trigger)")
    # as bad on sim:fp16, but sim:ane's group is the device's: the finding stays whole
    as_bad = _peer(member, _compared("tolerance", 30, 0.03), _compared("tolerance", 20, 0.02))
    report = _report([_group_row(member), _group_row(member, "sim:ane", attribution="device")],
                     [as_bad])
    assert [f.targets for f in report.findings] == [["sim:fp16", "sim:ane"]]
    assert report.failed and report.shared_with_torch == []
    # no peer (torch could not run, or a package source): nothing said, a finding
    (alone,) = _report([_group_row(member)], []).findings
    assert alone.title.endswith("(sim:fp16; torch.export)")


def _cli(source: str, target: str, inputs: dict[str, np.ndarray], tmp_path: Path, *,
         text: bool = True) -> tuple[int, dict[str, Any], str]:
    """``run SOURCE -t TARGET --inputs`` on torch.export alone: the exit code, the JSON
    report and (``text``) what the terminal shows."""
    npz = tmp_path / "trigger.npz"
    save_npz(npz, inputs)
    argv = [*NEBISECT, "run", source, "-t", target, "--inputs", str(npz), "--explore", "none",
            "--convert", "export"]
    done = subprocess.run([*argv, "--json"], capture_output=True, text=True, timeout=600,
                          cwd=REPO)
    assert done.returncode in (0, 1), done.stderr
    shown = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=REPO,
                           env={**os.environ, "COLUMNS": "400"}) if text else None
    assert shown is None or shown.returncode == done.returncode, shown.stderr
    return done.returncode, json.loads(done.stdout), shown.stdout if shown else ""


@pytest.mark.slow
@pytest.mark.parametrize(("target", "inputs", "torch"), [
    ("sim:fp16", BELOW_FP16, "torch:cpu:fp16"), ("sim:fp32", CONSTANT, "torch:cpu:fp32")],
    ids=["fp16", "fp32"])
def test_normalizing_by_a_spread_the_precision_cannot_hold_is_a_note(
        target: str, inputs: dict[str, np.ndarray], torch: str, tmp_path: Path) -> None:
    """fp16 loses a 1e-4 variation at 1.0 in torch's half as in the program; fp32
    amplifies the mean's rounding of a constant row by 1/√1e-5 in torch as in the
    program: a note, exit 0 (before: a precision finding, exit 1)."""
    code, report, text = _cli(f"{MODELS}:standardized", target, inputs, tmp_path)
    assert code == 0 and report["findings"] == [] and not report["failed"]
    (note,) = report["shared_with_torch"]
    assert (note["attribution"], note["op_type"], note["targets"]) == (
        "precision", "sub", [target])
    (peer,) = report["torch_peers"]
    assert (peer["torch"], peer["inputs"], peer["precision"]) == (
        torch, ["inputs"], target.partition(":")[2])
    assert peer["program"]["max_abs_error"] == pytest.approx(
        peer["peer"]["max_abs_error"], rel=0.5)
    precision = torch.rpartition(":")[2]
    assert f"— torch {precision} computes it as badly: max error" in text
    assert "the model's own conditioning at this precision, not a failure" in text


@pytest.mark.slow
@pytest.mark.parametrize(("source", "target", "inputs", "said"), [
    (f"{REPO}/examples/logsumexp_ne.py:model", "sim:fp16-naive",
     {"x": np.full((1, 1, 8, 8), 7.7, np.float32)},
     "; inf/NaN where torch fp16 stays finite (max error 0.00167 at its trigger)"),
    (f"{REPO}/examples/published/llama_rmsnorm_fp16.py:model", "sim:fp16",
     runpy.run_path(f"{REPO}/examples/published/llama_rmsnorm_fp16.py")["TRIGGER"],
     "; 2,599× torch fp16's error (max error 0.00125 vs Core ML's 3.26 at its trigger)")],
    ids=["logsumexp-naive", "llama-rmsnorm"])
def test_core_ml_far_worse_than_torch_keeps_its_finding_with_the_ratio(
        source: str, target: str, inputs: dict[str, np.ndarray], said: str,
        tmp_path: Path) -> None:
    """fp16 arithmetic without the max-shift overflows where torch's logsumexp in half
    does not; Llama's RMSNorm upcasts inside, so torch fp16 is exact to its rounding
    where the program's fp16 squares overflow."""
    code, report, _ = _cli(source, target, inputs, tmp_path, text=False)
    assert code == 1 and "shared_with_torch" not in report
    (finding,) = report["findings"]
    assert finding["attribution"] == "precision" and finding["title"].endswith(said)


@pytest.mark.slow
def test_torch_that_cannot_run_in_half_is_said_once_and_fp32_compares(tmp_path: Path) -> None:
    """Not comparable in fp16 (no half kernel): said once, never a crash; torch fp32
    holds the variation fp16 loses, so the program is far worse than it."""
    code, report, text = _cli(f"{MODELS}:half_refused", "sim:fp16", BELOW_FP16, tmp_path)
    assert code == 1
    assert report["torch_note"] == (
        "not comparable with torch:cpu:fp16: torch cannot run this model in fp16 "
        "(NotImplementedError: \"standardize_cpu\" not implemented for 'Half')")
    assert text.count("not comparable with torch:cpu:fp16") == 1
    (finding,) = report["findings"]
    assert "× torch fp32's error (max error" in finding["title"]
    assert [p["torch"] for p in report["torch_peers"]] == ["torch:cpu:fp32"]

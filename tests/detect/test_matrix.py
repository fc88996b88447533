"""``nebisect run``: the matrix, attribution and the command's contract (issue 4)."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import REPO, SUPPORT

from nebisect.arrays import save_npz
from nebisect.detect.attribution import attribute
from nebisect.detect.matrix import MatrixRunner, RunReport
from nebisect.executors.runner import Runner
from nebisect.isolate import Isolator
from nebisect.isolation.timeouts import Timeouts
from nebisect.sources.resolve import resolve_source
from nebisect.targets.plugins import parse_targets
from nebisect.targets.spec import TargetSpec
from nebisect.verdict import Verdict

NEBISECT = [sys.executable, "-m", "nebisect"]


def _run(source: str, targets: list[str], tmp_path: Path, isolator: Isolator,
         **kwargs: object) -> RunReport:
    """Today's matrix (no exploration) on the torch.export program."""
    from nebisect.sources.convert import convert_paths

    inputs = str(kwargs.pop("inputs", ""))
    lengths = kwargs.pop("lengths", (2, 8, 37, 128, 380))
    names = ["sim:fp64", *targets]
    plugins = [str(p) for p in kwargs.get("plugins", [])]  # type: ignore[attr-defined]
    runner = MatrixRunner(resolve_source(source),
                          list(parse_targets(names, plugins, timeout=Timeouts().load)), tmp_path,
                          Runner(isolator=isolator),
                          convert=functools.partial(convert_paths, paths=("export",)),
                          paths=("export",),
                          **kwargs)  # type: ignore[arg-type]
    return runner.run(lengths, inputs)  # type: ignore[arg-type]


def _cells(report: RunReport) -> dict[tuple[str, int], tuple[str, str, str]]:
    return {(r.target, r.length): (r.verdict.status, r.verdict.signature, r.attribution)
            for r in report.rows}


def test_seed_003_meanpool_data_dependent_shape_on_ane(tmp_path: Path, isolator: Isolator) -> None:
    report = _run(f"{REPO}/examples/meanpool.py:model", ["sim:fp32", "sim:fp16", "sim:ane"],
                  tmp_path, isolator)
    cells = _cells(report)
    assert sorted({length for _, length in cells}) == [2, 8, 37, 128, 380]
    for length in (2, 8, 37, 128, 380):
        assert cells["sim:fp64", length][0] == "pass"  # the converted program agrees with torch
        assert cells["sim:fp32", length][0] == "pass"
        assert cells["sim:fp16", length][0] == "pass"
        status, signature, attribution = cells["sim:ane", length]
        assert status == "error" and signature.startswith("error:predict:")
        assert "Data-dependent shapes were disabled" in signature
        assert attribution == "device"
    assert report.conversions["fp16"].conversion.path == "export"


@pytest.mark.parametrize(("x", "ane_status"), [(7.7, "mismatch"), (7.5, "pass")])
def test_seed_000_logsumexp_collapse_is_a_device_problem(
    x: float, ane_status: str, tmp_path: Path, isolator: Isolator
) -> None:
    npz = tmp_path / "x.npz"
    save_npz(npz, {"x": np.full((1, 1, 8, 8), x, np.float32)})
    report = _run(f"{REPO}/examples/logsumexp_ne.py:model", ["sim:fp16", "sim:ane"], tmp_path,
                  isolator, inputs=npz)
    cells = _cells(report)
    assert cells["sim:fp64", 0][0] == "pass"
    assert cells["sim:fp16", 0][0] == "pass"
    assert cells["sim:ane", 0][0] == ane_status
    if ane_status == "mismatch":
        assert cells["sim:ane", 0][1:] == ("mismatch:collapse", "device")


def test_conversion_error_is_a_convert_verdict(tmp_path: Path, isolator: Isolator) -> None:
    report = _run(f"{REPO}/examples/convert_fails.py:model", ["sim:fp16"], tmp_path, isolator,
                  lengths=(2,))
    verdicts = [r.verdict for r in report.rows]
    assert {v.status for v in verdicts} == {"error"} and {v.stage for v in verdicts} == {"convert"}
    assert all("lgamma" in v.message for v in verdicts)
    assert {r.attribution for r in report.rows} == {"conversion"}
    assert os.getpid() > 0  # the parent is alive and still collecting results


def test_segfault_in_predict_is_a_crash_with_stderr(tmp_path: Path, isolator: Isolator) -> None:
    report = _run(f"{REPO}/examples/meanpool.py:model", ["sim:segv-in-predict"], tmp_path,
                  isolator, lengths=(8,), plugins=[str(SUPPORT / "plugins_crash.py")])
    (row,) = [r for r in report.rows if r.target == "sim:segv-in-predict"]
    assert row.verdict.status == "crash" and row.verdict.signature == "crash:SIGSEGV"
    assert row.verdict.stage == "predict"
    assert "dereferencing NULL" in row.verdict.stderr_tail


@pytest.mark.parametrize(
    ("attribution", "target", "exact_ok", "fp16_ok", "stage"),
    [
        ("conversion", "sim:ane", False, True, "predict"),
        ("conversion", "sim:ane", None, None, "convert"),
        ("precision", "sim:ane", True, False, "predict"),
        ("precision", "sim:fp16", True, False, "predict"),
        ("device", "sim:ane", True, True, "predict"),
        ("device", "coreml:ne", None, True, "predict"),
    ],
)
def test_attribution_rules(attribution: str, target: str, exact_ok: bool | None,
                           fp16_ok: bool | None, stage: str) -> None:
    verdict = Verdict("mismatch", stage, "mismatch:collapse")
    assert attribute(TargetSpec.parse(target), verdict, exact_ok, fp16_ok) == attribution


def _cli(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NEBISECT, *args], capture_output=True, text=True, cwd=cwd,
                          timeout=600)


def test_cli_json_and_exit_code_on_failure(tmp_path: Path) -> None:
    npz = tmp_path / "x.npz"
    save_npz(npz, {"x": np.full((1, 1, 8, 8), 7.7, np.float32)})
    done = _cli("run", "examples/logsumexp_ne.py:model", "--inputs", str(npz), "-t", "sim:ane",
                "--json", "--explore", "none", "--convert", "export")
    assert done.returncode == 1, done.stderr
    payload = json.loads(done.stdout)
    rows = {r["target"]: r for r in payload["rows"]}
    assert rows["sim:ane"]["verdict"]["signature"] == "mismatch:collapse"
    assert rows["sim:ane"]["attribution"] == "device"
    assert rows["sim:fp64"]["verdict"]["status"] == "pass"


def test_cli_text_names_each_distinct_failure_once() -> None:
    """Two: the Neural Engine's rejection on torch.export, and jit.trace's conversion
    failure on NumPy >= 2.4 — once, though three targets' conversions show it (with
    --strict-conversion, which lets that failure end the path: without it the path is
    judged as converted with nebisect's converter overrides, test_cured_conversion.py)."""
    done = _cli("run", "examples/meanpool.py:model", "-t", "sim:ane", "-t", "sim:fp16",
                "--lengths", "2,8", "--explore", "none", "--strict-conversion")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    failures = [line for line in lines if line.startswith("✗")]
    assert len(failures) == 2, failures
    device = next(line for line in failures if "predict" in line)
    assert device.startswith("✗ 2 device: the model fails at predict: SimPredictError:")
    assert "Data-dependent shapes were disabled" in device
    assert device.endswith("(sim:ane; torch.export only)")
    conversion = next(line for line in failures if "conversion fails" in line)
    assert conversion.startswith("✗ 1 conversion: conversion fails on jit.trace only: ")
    assert conversion.endswith("(sim:fp64, sim:ane, sim:fp16)")
    assert "    sim:ane   torch.export length(2)  jit.trace another failure" in lines
    assert "    sim:fp16  torch.export pass  jit.trace length(2)" in lines


def _bad_package(tmp_path: Path) -> Path:
    package = tmp_path / "corrupt.mlpackage"
    (package / "Data").mkdir(parents=True)
    (package / "Manifest.json").write_text("{ not json")
    return package


def _raising_factory(tmp_path: Path) -> str:
    file = tmp_path / "raising.py"
    file.write_text("def model():\n    raise RuntimeError('weights not found')\n")
    return f"{file}:model"


@pytest.mark.parametrize(
    ("make_source", "extra", "message"),
    [
        (lambda p: str(p / "absent.mlpackage"), [], "no such file"),
        (lambda p: (p / "old.mlmodel").write_bytes(b"\x08\x04") and str(p / "old.mlmodel"),
         [], "neuralnetwork .mlmodel"),
        (_bad_package, [], "Manifest.json is not valid JSON"),
        (_raising_factory, [], "weights not found"),
        (lambda p: "examples/meanpool.py:model", ["--target", "sim:fp8"], "unknown target"),
        (lambda p: "examples/meanpool.py:model", ["--lengths", "a,b"], "--lengths"),
    ],
)
def test_bad_sources_are_one_line_exit_2(make_source, extra, message, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    done = _cli("run", str(make_source(tmp_path)), *extra)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"y": np.zeros((1, 1, 8, 8), np.float32)}, "missing ['x']"),
        ({"x": np.zeros((1, 1, 4, 8), np.float32)}, "shape [1, 1, 4, 8]"),
        ({"x": np.zeros((1, 1, 8, 8), np.int32)}, "dtype int32"),
    ],
)
def test_bad_inputs_are_one_line_exit_2(arrays: dict[str, np.ndarray], message: str,
                                         tmp_path: Path) -> None:
    npz = tmp_path / "bad.npz"
    save_npz(npz, arrays)
    done = _cli("run", "examples/logsumexp_ne.py:model", "--inputs", str(npz))
    assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr


def test_truncated_inputs_file(tmp_path: Path) -> None:
    npz = tmp_path / "bad.npz"
    save_npz(npz, {"x": np.zeros((1, 1, 8, 8), np.float32)})
    npz.write_bytes(npz.read_bytes()[:100])
    done = _cli("run", "examples/logsumexp_ne.py:model", "--inputs", str(npz))
    assert done.returncode == 2 and "bad.npz" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("overrides", [False, True])
def test_minilm_meanpool_dynamic(overrides: bool, tmp_path: Path, isolator: Isolator) -> None:
    """The honest outcome of plain coremltools, and sim:fp32 = torch with the overrides,
    through the matrix at both ends of the dynamic range (tests/end_to_end/test_minilm.py
    checks the lengths in between, in process)."""
    import functools

    from nebisect.sources.convert import OVERRIDES_SETUP, convert_paths

    runner = MatrixRunner(
        resolve_source(f"{REPO}/examples/minilm_meanpool.py:model"),
        [TargetSpec.parse("sim:fp64"), TargetSpec.parse("sim:fp32")],
        tmp_path, Runner(isolator=isolator),
        convert=functools.partial(convert_paths, setup=(OVERRIDES_SETUP,) if overrides else ()),
    )
    report = runner.run((2, 380))
    assert sorted({r.length for r in report.rows}) == [2, 380]
    if not overrides:
        assert {r.verdict.stage for r in report.rows} == {"convert"}
        assert all("new_ones" in r.verdict.message for r in report.rows)
        assert {r.attribution for r in report.rows} == {"conversion"}
        return
    for row in report.rows:
        assert row.verdict.status == "pass", (row.target, row.length, row.verdict.message)
        if row.target == "sim:fp32":
            assert row.verdict.error_metrics.min_cosine >= 0.99999


UNSEEDED = """
import torch
from torch import nn


class LinearTanh(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        return torch.tanh(self.linear(x))


def model():
    {seed}
    return {{"module": LinearTanh(), "example_inputs": (torch.randn(1, 8) * 3,)}}
"""


@pytest.mark.parametrize("seed", ["", "torch.manual_seed(1234)"])
def test_an_unseeded_factory_is_judged_like_a_seeded_one(seed: str, tmp_path: Path) -> None:
    """Reference and conversion rebuild the module in different processes (exploring
    targets on two jobs: templates of their own); without the same weights in all of
    them, every explored fp16 row was a false ``conversion`` finding at tanh."""
    source = tmp_path / "linear_tanh.py"
    source.write_text(UNSEEDED.format(seed=seed))
    done = subprocess.run(
        [*NEBISECT, "run", f"{source}:model", "-t", "sim:fp32", "-t", "sim:fp16",
         "--convert", "export", "--budget", "4", "--jobs", "2", "--json"],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    rows = json.loads(done.stdout)["rows"]
    assert len(rows) == 14 and {r["verdict"]["status"] for r in rows} == {"pass"}
    exact = [r["verdict"]["metrics"]["max_abs_error"] for r in rows
             if r["target"] == "sim:fp64"]
    assert exact and max(exact) < 1e-6


def test_a_factory_that_draws_from_the_os_is_refused_in_one_line(tmp_path: Path) -> None:
    source = tmp_path / "entropy.py"
    source.write_text(UNSEEDED.format(seed="torch.manual_seed(int.from_bytes(os.urandom(4)))")
                      .replace("import torch\n", "import os\nimport torch\n", 1))
    done = subprocess.run([*NEBISECT, "run", f"{source}:model", "--explore", "none"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "builds different weights or example inputs on each call" in line


def test_targets_that_cannot_run_here_are_an_input_error(tmp_path: Path) -> None:
    """Off a Mac, ``-t coreml:ne`` judges nothing: one line and exit 2, not "all agree"."""
    if sys.platform == "darwin":
        pytest.skip("Core ML runs here")
    done = subprocess.run([*NEBISECT, "run", f"{REPO}/examples/logsumexp_ne.py:model",
                           "-t", "coreml:ne", "--explore", "none", "--lengths", "1",
                           "--report", str(tmp_path / "report")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "nebisect: error: nothing ran: coreml:ne cannot run here "
        "(requires macOS and Core ML (this is Linux))")
    assert "agree" not in done.stdout and not (tmp_path / "report" / "report.json").exists()


@pytest.mark.parametrize(("factory", "extra"), [
    ("undeclared", []),
    ("undeclared", ["--input-range", "pixel_values=0:2048"]),
    ("undeclared", ["--input-range", "pixel_values=0:1"]),
    ("model", []),
])
def test_a_far_trigger_is_a_margin_unless_a_declared_domain_reaches_it(
        factory: str, extra: list[str]) -> None:
    """The Linear overflows fp16 once pixels reach 1024, over a thousand times the
    example's largest pixel: without a domain a margin beside the findings (beyond 128×
    the example), judged once a declared domain reaches it — where torch in fp16
    overflows too: the model's own fp16 range, a note (nebisect.detect.same_precision)
    —, and lint's margin (1 024× beyond [0, 1]) when the domain stops short of it. No
    case fails."""
    done = subprocess.run(
        [*NEBISECT, "run", f"{SUPPORT}/domain_models.py:{factory}", "-t", "sim:fp16",
         "--convert", "export", "--budget", "12", "--json", *extra],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["failed"] is False and report["findings"] == []
    if not extra and factory == "undeclared":
        [far] = report["far_findings"]
        assert far["groups"][0]["smallest"]["label"] == "const(x=1024.0)"
        assert report["undeclared"] == ["pixel_values"] and report["margins"] == []
        assert 0.9 < report["input_scale"] <= 1.0
        return
    if "pixel_values=0:2048" in extra:
        assert report["groups"][0]["smallest"]["label"] == "const(x=1024.0)"
        assert report["far_findings"] == [] and report["margins"] == []
        [note] = report["shared_with_torch"]
        assert (note["op_type"], note["symptom"]) == ("linear", "nonfinite")
        assert {(p["torch"], p["program"]["kind"], p["peer"]["kind"])
                for p in report["torch_peers"]} == {("torch:cpu:fp16", "nonfinite",
                                                     "nonfinite")}
        return
    [margin] = report["margins"]
    assert margin["op_type"] == "linear" and margin["domain"] == "[0, 1]"
    assert margin["magnitude"] == pytest.approx(1023.5, rel=1e-6)
    assert margin["factor"] == pytest.approx(1023.5, rel=1e-6)
    explored = [r for r in report["rows"] if r["explored"]]
    assert explored and all(r["verdict"]["status"] == "pass" for r in explored)
    assert max(r["input_set"]["magnitude"] for r in explored) <= 1.0


@pytest.mark.parametrize(("message", "named"), [
    ("torch.export: NotImplementedError: Unsupported fx node new_ones, kind new_ones | "
     "jit.trace: TypeError: only 0-dimensional arrays can be converted to Python scalars", True),
    ("torch.export: NotImplementedError: Unsupported fx node lgamma, kind lgamma", False),
])
def test_a_known_converter_incompatibility_names_the_overrides(message: str,
                                                               named: bool) -> None:
    from nebisect.detect.causes import RunFinding
    from nebisect.detect.summary import finding_lines
    from nebisect.inputs.families import Member
    from nebisect.search.records import FailureGroup

    static = Member("length", "static")
    group = FailureGroup("sim:fp32", "", "error:convert:…", "conversion", None, static,
                         message, [static])
    text = "\n".join(finding_lines(RunFinding(1, "", "error", [group])))
    assert ("--converter-overrides" in text) is named


@pytest.mark.parametrize("factory", ["padded_inferred", "padded_unmasked"])
def test_padded_positions_are_nobodys_bug(factory: str) -> None:
    """fp16 overflows only where the mask is 0: nothing fails when the output follows
    the mask (inferred from its [batch, seq, …] shape); when the factory says no output
    does, the padded positions are compared and fail — as they do in torch's own fp16,
    so the finding is a note (the model's own fp16 range)."""
    done = subprocess.run(
        [*NEBISECT, "run", f"{SUPPORT}/domain_models.py:{factory}", "-t", "sim:fp16",
         "--convert", "export", "--lengths", "6", "--families", "masks", "--budget", "3",
         "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    report = json.loads(done.stdout)
    fp16 = {r["input_set"]["label"]: r["verdict"] for r in report["rows"]
            if r["target"] == "sim:fp16"}
    assert {"example", "mask(ones)", "mask(left-padded)"} <= set(fp16)
    assert "mask(zeros)" not in fp16  # no input a model takes
    if factory == "padded_inferred":
        assert report["masked_outputs"] == {"last_hidden_state": "attention_mask"}
        assert report["masks_inferred"] is True and report["groups"] == []
        assert fp16["example"]["metrics"]["masked"] == {"last_hidden_state": 8}
        assert "masked" not in fp16["mask(ones)"]["metrics"]
    else:
        assert report["masked_outputs"] == {}
        assert fp16["example"]["signature"] == "mismatch:nonfinite"
        assert fp16["mask(ones)"]["status"] == "pass"
        [note] = report["shared_with_torch"]
        assert note["symptom"] == "nonfinite" and report["findings"] == []


NONFINITE_EXAMPLE = """
import torch
from torch import nn


class NaiveSoftmax(nn.Module):
    def forward(self, x):
        e = torch.exp(x)
        return e / e.sum(-1, keepdim=True)


def model():
    x = torch.tensor([[1.0, 2.0, float("-inf"), 0.5]])
    return {"module": NaiveSoftmax(), "example_inputs": (x,)}
"""


def test_an_example_holding_inf_ranks_its_findings_without_a_crash(tmp_path: Path) -> None:
    """An additive mask's -inf in the example: the example's scale is infinite, and
    ranking a finding the exploration found by its distance from it raised ``math
    domain error`` (the atlas met it on ``masked.logsumexp``)."""
    source = tmp_path / "exp_masked.py"
    source.write_text(NONFINITE_EXAMPLE)
    done = subprocess.run(
        [*NEBISECT, "run", f"{source}:model", "-t", "sim:fp16", "--convert", "export",
         "--budget", "8", "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    # found beyond the example: the sum of four exps overflows fp16 from x ≈ 9.7 (the
    # division then gives wrong finite values), exp itself from x ≈ 11.1 — in torch's
    # own fp16 too: notes, ranked as findings are
    findings = json.loads(done.stdout)["shared_with_torch"]
    assert [(f["attribution"], f["symptom"], f["op_type"]) for f in findings] == [
        ("precision", "nonfinite", "exp"), ("precision", "tolerance", "reduce_sum")]
    assert all(f["smallest"]["label"] != "example" for f in findings)

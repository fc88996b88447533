"""Published coremltools bugs, rebuilt in ``examples/published/``, as nebisect sees them (issue 12).

Each factory's example input is benign; its ``TRIGGER`` shows the bug. Three kinds of test:

* ``test_trigger_is_found`` — ``nebisect run FACTORY --inputs TRIGGER --explore none --json``
  reports the failing rows with the attribution the report implies (target, status,
  signature, attribution) on the conversion path the bug lives on.
* ``test_found_without_inputs`` — with the factory alone, ``run`` explores (value families,
  guided probes, both conversion paths) and finds each bug that standard-normal inputs
  miss: a failure group on each expected target with that attribution. Before issue 12
  these all passed (``run`` evaluated one standard-normal input on the first program that
  converted). The others (gelu_tanh_export, remainder_one, reciprocal_eps, avg_pool_ceil)
  standard normal inputs already reach; they are not re-run here to keep the file fast.
* ``test_one_path_bugs`` — ``run --convert both`` with the trigger: the bug is a
  ``conversion`` failure on exactly one path and a pass on the other.

Sources (all reproduce with coremltools 9.0 / torch 2.13):

* log_softmax_fp16 — apple/coremltools#2728 (log_softmax → -inf in fp16, one dominant class)
* rms_norm_eps — apple/coremltools#2821 (rms_norm epsilon rescaled by max|x|²)
* llama_rmsnorm_fp16 — pytorch/executorch#19523, #8641 (fp32 upcast dropped; x² overflows)
* gelu_tanh_export — apple/coremltools#2863 (approximate="tanh" ignored on torch.export)
* remainder_one — apple/coremltools#2836 (x % 1 converts to zeros)
* reciprocal_eps — apple/coremltools#2773 (reciprocal converted with inverse's epsilon 1e-4)
* avg_pool_ceil — apple/coremltools#2772, PR #2844 (ceil_mode overhang divided by the kernel)

Two more convert and save, then Core ML refuses to load them (``test_refused_at_load``):

* linear_int32 — apple/coremltools#2575, pytorch/executorch#11691 (int32 ``linear``: "Failed
  to build the model execution plan ... error code: -14.")
* reflection_pad_3d — apple/coremltools#2576, #2571, PR #2701 (reflect ``pad`` outside the
  last two dims: "Padding for more than two dimensions only supports `constant` mode")
* std_correction_trace — apple/coremltools#2718 (var/std correction ≥ 2 lost under jit.trace)
* index_put_trace — apple/coremltools#2188 (in-place index_put on a slice dropped under jit.trace)
* floor_divide_int — apple/coremltools#2570 (integer floor_divide computed in float, float out)
* div_floor_int — apple/coremltools#2733 (integer div(rounding_mode="floor") computed in float)

The two integer bugs are off by one past the float's exact-integer range (fp16: 2048), inside
any float tolerance: ``test_integer_trigger_is_found`` expects ``mismatch:integer``, which
integer outputs compared exactly give, attributed ``conversion`` because the program returns
the integers as floats.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import REPO

from nebisect.arrays import save_npz

PUBLISHED = REPO / "examples" / "published"

#: (status, signature or None when not pinned, attribution) per target.
Row = tuple[str, str | None, str]


@dataclass(frozen=True)
class Bug:
    """One published bug: the targets to run and the rows the trigger must produce."""

    name: str
    source: str
    targets: tuple[str, ...]
    rows: dict[str, Row]
    missed_by_normals: bool = True
    path: str = "export"


BUGS = [
    Bug("log_softmax_fp16", "apple/coremltools#2728", ("sim:fp16", "sim:ane"),
        # sim:ane's row is not pinned: it reads -103.25, not the report's -inf, because the
        # profile places the fp16 ``log`` (whose epsilon const stays fp32) on the CPU.
        {"sim:fp16": ("mismatch", "mismatch:nonfinite", "precision"),
         "sim:ane": ("mismatch", None, "precision")}),
    Bug("rms_norm_eps", "apple/coremltools#2821", ("sim:fp32",),
        {"sim:fp32": ("mismatch", "mismatch:tolerance", "conversion")}),
    Bug("llama_rmsnorm_fp16", "pytorch/executorch#19523", ("sim:fp16", "sim:ane"),
        {"sim:fp16": ("mismatch", "mismatch:collapse", "precision"),
         "sim:ane": ("mismatch", "mismatch:collapse", "precision")}),
    Bug("gelu_tanh_export", "apple/coremltools#2863", ("sim:fp32",),
        {"sim:fp32": ("mismatch", "mismatch:tolerance", "conversion")}, missed_by_normals=False),
    Bug("remainder_one", "apple/coremltools#2836", ("sim:fp32",),
        {"sim:fp32": ("mismatch", "mismatch:tolerance", "conversion")}, missed_by_normals=False),
    Bug("reciprocal_eps", "apple/coremltools#2773", ("sim:fp32",),
        {"sim:fp32": ("mismatch", "mismatch:tolerance", "conversion")}, missed_by_normals=False),
    Bug("avg_pool_ceil", "apple/coremltools#2772", ("sim:fp32", "sim:fp32:spec"),
        {"sim:fp32": ("mismatch", "mismatch:tolerance", "conversion"),
         "sim:fp32:spec": ("pass", "pass", "")}, missed_by_normals=False),
    # Found at any input (the write is dropped), so standard normals reach it.
    Bug("index_put_trace", "apple/coremltools#2188", ("sim:fp32",),
        {"sim:fp32": ("mismatch", "mismatch:tolerance", "conversion")}, missed_by_normals=False,
        path="trace"),
]
#: Integer results computed through float: off by one past the float's exact-integer range.
INTEGER_BUGS = [
    Bug("floor_divide_int", "apple/coremltools#2570", ("sim:fp32", "sim:fp16"),
        {"sim:fp32": ("mismatch", "mismatch:integer", "conversion"),
         "sim:fp16": ("mismatch", "mismatch:integer", "conversion")}),
    Bug("div_floor_int", "apple/coremltools#2733", ("sim:fp32", "sim:fp16"),
        {"sim:fp32": ("mismatch", "mismatch:integer", "conversion"),
         "sim:fp16": ("mismatch", "mismatch:integer", "conversion")}),
]
#: The jit.trace-only bug: a conversion mismatch on the trace program, at any input.
TRACE_ONLY = Bug("std_correction_trace", "apple/coremltools#2718", ("sim:fp32",),
                 {"sim:fp32": ("mismatch", "mismatch:tolerance", "conversion")}, path="trace")


def _factory_module(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"published_{name}", PUBLISHED / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(bug: Bug, *args: str) -> tuple[int, dict[str, Any]]:
    """``nebisect run`` in a subprocess (PYTHONPATH inherited); exit code and JSON report."""
    command = [sys.executable, "-m", "nebisect", "run", f"examples/published/{bug.name}.py:model",
               "--json", *args]
    for target in bug.targets:
        command += ["--target", target]
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=600)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def _trigger(bug: Bug, tmp_path: Path) -> Path:
    npz = tmp_path / "trigger.npz"
    save_npz(npz, _factory_module(bug.name).TRIGGER)
    return npz


def _matrix(report: dict[str, Any]) -> dict[tuple[str, str], tuple[str, str, str]]:
    """(target, path) → (status, signature, attribution) of the ``--inputs`` rows."""
    return {(row["target"], row["path"]): (row["verdict"]["status"], row["verdict"]["signature"],
                                           row["attribution"])
            for row in report["rows"] if row["input_set"]["label"] == "inputs"}


def _assert_rows(report: dict[str, Any], expected: dict[str, Row], path: str) -> None:
    matrix = _matrix(report)
    for target, (status, signature, attribution) in expected.items():
        got_status, got_signature, got_attribution = matrix[target, path]
        assert (got_status, got_attribution) == (status, attribution), (target, matrix)
        if signature is not None:
            assert got_signature == signature, (target, matrix)


@pytest.mark.slow
@pytest.mark.parametrize("bug", BUGS, ids=lambda bug: bug.name)
def test_trigger_is_found(bug: Bug, tmp_path: Path) -> None:
    code, report = _run(bug, "--inputs", str(_trigger(bug, tmp_path)), "--explore", "none",
                        "--convert", bug.path)
    assert code == 1, f"{bug.source}: the trigger must fail"
    _assert_rows(report, bug.rows, bug.path)


@pytest.mark.slow
@pytest.mark.parametrize("bug", INTEGER_BUGS, ids=lambda bug: bug.name)
@pytest.mark.parametrize("path", ["export", "trace"])
def test_integer_trigger_is_found(bug: Bug, path: str, tmp_path: Path) -> None:
    """Both paths compute the integer quotient in float; the trigger is off by one."""
    code, report = _run(bug, "--inputs", str(_trigger(bug, tmp_path)), "--explore", "none",
                        "--convert", path)
    assert code == 1, f"{bug.source}: the trigger must fail"
    _assert_rows(report, bug.rows, path)


@pytest.mark.slow
@pytest.mark.parametrize("bug", [*(bug for bug in BUGS if bug.missed_by_normals), TRACE_ONLY],
                         ids=lambda bug: bug.name)
def test_found_without_inputs(bug: Bug) -> None:
    """``run`` with the factory alone finds the bug, with the trigger's attribution, on the
    path it lives on (before issue 12 every row passed)."""
    code, report = _run(bug)
    assert code == 1, f"{bug.source}: run must find it by exploring"
    groups = report["groups"]
    for target, (status, signature, attribution) in bug.rows.items():
        found = [g for g in groups if g["target"] == target and g["path"] == bug.path
                 and g["signature"].startswith(signature or status)
                 and g["attribution"] == attribution]
        assert found, (target, [(g["target"], g["path"], g["signature"], g["attribution"])
                                for g in groups])
    if bug is TRACE_ONLY:
        assert {g["path"] for g in groups} == {"trace"}


@pytest.mark.slow
@pytest.mark.parametrize(("name", "broken"), [("gelu_tanh_export", "export"),
                                              ("std_correction_trace", "trace"),
                                              ("index_put_trace", "trace")])
def test_one_path_bugs(name: str, broken: str, tmp_path: Path) -> None:
    """``run --convert both``: a conversion failure on one path, a pass on the other."""
    bug = next(b for b in [*BUGS, TRACE_ONLY] if b.name == name)
    code, report = _run(bug, "--inputs", str(_trigger(bug, tmp_path)), "--explore", "none",
                        "--convert", "both")
    assert code == 1
    matrix = _matrix(report)
    fine = "trace" if broken == "export" else "export"
    for target in ("sim:fp64", "sim:fp32"):
        assert matrix[target, broken][::2] == ("mismatch", "conversion"), matrix
        assert matrix[target, fine][0] == "pass", matrix


@pytest.mark.slow
@pytest.mark.parametrize(("name", "rule", "text"), [
    ("linear_int32", "linear-integer", "Failed to build the model execution plan using a "
     "model architecture file '<path>/model.mil' with error code: -14."),
    ("reflection_pad_3d", "pad-outer-dims-non-constant",
     "Padding for more than two dimensions only supports `constant` mode"),
])
def test_refused_at_load(name: str, rule: str, text: str) -> None:
    """``run`` on the report's torch model: ``error:load`` with the published text on the
    three unit-modelling targets, on both conversion paths, attributed ``device`` and
    found once; the exact evaluation runs it; the finding names the rule's remedy."""
    targets = ("sim:fp32", "sim:fp16", "sim:ane")
    bug = Bug(name, "", targets, {})
    code, report = _run(bug, "--explore", "none", "--convert", "both")
    assert code == 1
    for row in report["rows"]:
        verdict = row["verdict"]
        if row["target"] == "sim:fp64":
            assert verdict["status"] == "pass", row
            continue
        assert (verdict["status"], verdict["stage"], row["attribution"]) == (
            "error", "load", "device"), row
        assert text in verdict["message"] and verdict["signature"].startswith(
            "error:load:SimRefusal:"), row
    assert {(r["target"], r["path"]) for r in report["rows"] if r["target"] != "sim:fp64"} == {
        (t, p) for t in targets for p in ("export", "trace")}
    (finding,) = report["findings"]
    assert (finding["attribution"], finding["stage"]) == ("device", "load")
    lint = subprocess.run([sys.executable, "-m", "nebisect", "lint",
                           f"examples/published/{name}.py:model", "--format", "json"],
                          capture_output=True, text=True, cwd=REPO, timeout=600)
    assert lint.returncode == 1, lint.stderr
    flagged = [f for f in json.loads(lint.stdout)["findings"] if f["rule_id"] == "runtime-rule"]
    assert len(flagged) == 2 and all(f"rule {rule})" in f["message"] for f in flagged)


@pytest.mark.slow
def test_avg_pool_ceil_names_the_runtime_rule(tmp_path: Path) -> None:
    """The conversion mismatch's culprit op is the ``avg_pool`` breaking the runtime rule of
    coremltools #2772: the row's culprit names it, and ``:spec`` (the definition) passes."""
    bug = next(b for b in BUGS if b.name == "avg_pool_ceil")
    code, report = _run(bug, "--inputs", str(_trigger(bug, tmp_path)), "--explore", "none",
                        "--convert", "export")
    assert code == 1
    rows = {row["target"]: row for row in report["rows"]
            if row["input_set"]["label"] == "inputs"}
    culprit = rows["sim:fp32"]["culprit"]
    assert (culprit["op_type"], culprit["rules"]) == ("avg_pool", ["avg-pool-ceil-overhang"])
    assert rows["sim:fp32:spec"]["verdict"]["status"] == "pass"

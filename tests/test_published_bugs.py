"""Published coremltools bugs, rebuilt in ``examples/published/``, as nebisect sees them (issue 12).

Each factory's example input is benign; its ``TRIGGER`` shows the bug. Two kinds of test:

* ``test_trigger_is_found`` — ``nebisect run FACTORY --inputs TRIGGER --json`` reports the
  failing rows with the attribution the report implies (target, status, signature,
  attribution, and the conversion path of the evaluated program).
* ``test_discovery_gap_today`` — DISCOVERY GAP (flip once ``run`` explores, issue 12): with
  the factory alone, today's ``run`` evaluates one standard-normal input on the first program
  that converts, and passes on the value-range bugs (``missed_today``) and on the
  jit.trace-only bug (even handed its trigger). When ``run`` searches, each of them must be
  found without ``--inputs``: flip the assertion to ``test_trigger_is_found``'s rows. The
  other three (gelu_tanh_export, remainder_one, reciprocal_eps) today's ``run`` already
  finds from its standard-normal input — fractional values, values near 0, |x| ≈ 2 — with
  the same rows as their trigger; they are not re-run here to keep the file fast.

``test_one_path_bugs`` converts the two one-path bugs on both paths in-process and evaluates
each program in float64: the bug lives on exactly one path, which ``run`` cannot show until
it evaluates both (issue 12 item 6).

Sources (all reproduce with coremltools 9.0 / torch 2.13):

* log_softmax_fp16 — apple/coremltools#2728 (log_softmax → -inf in fp16, one dominant class)
* rms_norm_eps — apple/coremltools#2821 (rms_norm epsilon rescaled by max|x|²)
* llama_rmsnorm_fp16 — pytorch/executorch#19523, #8641 (fp32 upcast dropped; x² overflows)
* gelu_tanh_export — apple/coremltools#2863 (approximate="tanh" ignored on torch.export)
* remainder_one — apple/coremltools#2836 (x % 1 converts to zeros)
* reciprocal_eps — apple/coremltools#2773 (reciprocal converted with inverse's epsilon 1e-4)
* std_correction_trace — apple/coremltools#2718 (var/std correction ≥ 2 lost under jit.trace)
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

from nebisect.case import save_npz

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "examples" / "published"

#: (status, signature or None when not pinned, attribution) per target.
Row = tuple[str, str | None, str]


@dataclass(frozen=True)
class Bug:
    """One published bug: the targets to run and the rows the trigger must produce."""

    name: str
    source: str
    targets: tuple[str, ...]
    rows: dict[str, Row]
    missed_today: bool = True
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
        {"sim:fp32": ("mismatch", "mismatch:tolerance", "conversion")}, missed_today=False),
    Bug("remainder_one", "apple/coremltools#2836", ("sim:fp32",),
        {"sim:fp32": ("mismatch", "mismatch:tolerance", "conversion")}, missed_today=False),
    Bug("reciprocal_eps", "apple/coremltools#2773", ("sim:fp32",),
        {"sim:fp32": ("mismatch", "mismatch:tolerance", "conversion")}, missed_today=False),
]
#: The jit.trace-only bug: today's ``run`` evaluates the torch.export program and passes.
TRACE_ONLY = Bug("std_correction_trace", "apple/coremltools#2718", ("sim:fp32",), {})


def _factory_module(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"published_{name}", PUBLISHED / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(bug: Bug, inputs: Path | None) -> tuple[int, dict[str, Any]]:
    """``nebisect run`` in a subprocess (PYTHONPATH inherited); exit code and JSON report."""
    args = [sys.executable, "-m", "nebisect", "run", f"examples/published/{bug.name}.py:model",
            "--json"]
    for target in bug.targets:
        args += ["--target", target]
    if inputs is not None:
        args += ["--inputs", str(inputs)]
    done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def _matrix(report: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {row["target"]: (row["verdict"]["status"], row["verdict"]["signature"],
                            row["attribution"]) for row in report["rows"]}


def _assert_rows(report: dict[str, Any], expected: dict[str, Row]) -> None:
    matrix = _matrix(report)
    for target, (status, signature, attribution) in expected.items():
        got_status, got_signature, got_attribution = matrix[target]
        assert (got_status, got_attribution) == (status, attribution), (target, matrix[target])
        if signature is not None:
            assert got_signature == signature, (target, matrix[target])


def _evaluated_path(report: dict[str, Any]) -> set[str]:
    """The conversion path of every program ``run`` evaluated (one per precision)."""
    return {conversion["metrics"]["path"] for conversion in report["conversions"].values()}


@pytest.mark.slow
@pytest.mark.parametrize("bug", BUGS, ids=lambda bug: bug.name)
def test_trigger_is_found(bug: Bug, tmp_path: Path) -> None:
    npz = tmp_path / "trigger.npz"
    save_npz(npz, _factory_module(bug.name).TRIGGER)
    code, report = _run(bug, npz)
    assert code == 1, f"{bug.source}: the trigger must fail"
    _assert_rows(report, bug.rows)
    assert _evaluated_path(report) == {bug.path}


@pytest.mark.slow
@pytest.mark.parametrize("bug", [*(bug for bug in BUGS if bug.missed_today), TRACE_ONLY],
                         ids=lambda bug: bug.name)
def test_discovery_gap_today(bug: Bug, tmp_path: Path) -> None:
    """DISCOVERY GAP — flip when ``run`` explores: each bug must then be found unasked.

    Today every row passes: the generated standard-normal input does not reach the value
    range, and the jit.trace-only bug is missed even when handed its trigger because only
    the torch.export program is evaluated.
    """
    inputs = None
    if bug is TRACE_ONLY:
        inputs = tmp_path / "trigger.npz"
        save_npz(inputs, _factory_module(bug.name).TRIGGER)
    code, report = _run(bug, inputs)
    assert code == 0, f"{bug.source}: today's run now finds it — flip this test"
    assert {status for status, _, _ in _matrix(report).values()} == {"pass"}
    assert _evaluated_path(report) == {"export"}


def _convert(module: Any, example: dict[str, Any], path: str) -> Any:
    """The MIL program of one conversion path (as ``nebisect.convert`` does it, fp32)."""
    import coremltools as ct
    import torch

    args = tuple(example.values())
    inputs = [ct.TensorType(name=name, shape=tuple(t.shape)) for name, t in example.items()]
    graph = (torch.export.export(module, args).run_decompositions({}) if path == "export"
             else torch.jit.trace(module, args))
    converted = ct.convert(graph, inputs=inputs, convert_to="mlprogram",
                           compute_precision=ct.precision.FLOAT32,
                           minimum_deployment_target=ct.target.iOS18)
    return converted._mil_program


@pytest.mark.slow
@pytest.mark.parametrize(("name", "broken"), [("gelu_tanh_export", "export"),
                                              ("std_correction_trace", "trace")])
def test_one_path_bugs(name: str, broken: str) -> None:
    """The converted program disagrees with torch (in float64) on one path only."""
    import torch

    from nebisect.mil.interp import run_program
    from nebisect.verdict import compare

    factory = _factory_module(name)
    source = factory.model()
    module = source["module"].eval()
    trigger = factory.TRIGGER
    with torch.no_grad():
        reference = module.double()(*(torch.from_numpy(a).double() for a in trigger.values()))
    module.float()
    passed = {}
    for path in ("export", "trace"):
        program = _convert(module, source["example_inputs"], path)
        (output,) = run_program(program, trigger, "fp64").outputs.values()
        passed[path] = compare("output", reference.numpy(), output, "fp32").passed
    assert passed == {path: path != broken for path in ("export", "trace")}

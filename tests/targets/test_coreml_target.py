"""The real Core ML target. Prediction tests need macOS; they run in .github/workflows/macos.yml."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nebisect.case import SourceRef
from nebisect.targets.registry import get_target

ON_MAC = platform.system() == "Darwin"
needs_coreml = pytest.mark.skipif(
    not ON_MAC, reason="Core ML predicts only on macOS (runs in .github/workflows/macos.yml)"
)


@pytest.mark.skipif(ON_MAC, reason="checks the reason given off macOS")
def test_unavailable_off_macos_with_reason() -> None:
    for name in ("coreml:cpu", "coreml:gpu", "coreml:ne", "coreml:all"):
        reason = get_target(name).availability()
        assert reason is not None and "requires macOS" in reason


def test_cache_dir_follows_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from nebisect.targets.coreml import cache_dir

    monkeypatch.setenv("NEBISECT_CACHE", str(tmp_path))
    assert cache_dir() == tmp_path / "compiled"


def _logsumexp_package(tmp_path: Path, channels: int) -> Path:
    from coremltools.converters.mil import Builder as mb

    from nebisect.mil.load import save_program

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, channels, 8, 8))])
    def prog(x):  # type: ignore[no-untyped-def]
        return mb.reduce_log_sum_exp(x=x, axes=[1], keep_dims=True)

    path = tmp_path / f"lse{channels}.mlpackage"
    save_program(prog, path)
    return path


@pytest.mark.macos
@needs_coreml
def test_compiled_once_per_content_hash(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from nebisect.targets.coreml import compiled_path

    monkeypatch.setenv("NEBISECT_CACHE", str(tmp_path / "cache"))
    first = compiled_path(_logsumexp_package(tmp_path, 32))
    stamp = first.stat().st_mtime_ns
    assert compiled_path(_logsumexp_package(tmp_path, 32)) == first
    assert first.stat().st_mtime_ns == stamp
    assert compiled_path(_logsumexp_package(tmp_path, 16)) != first


@pytest.mark.macos
@needs_coreml
@pytest.mark.parametrize("name", ["coreml:cpu", "coreml:ne"])
def test_predict_and_placement(name: str, tmp_path: Path) -> None:
    from nebisect.sources.artifact import Artifact

    package = _logsumexp_package(tmp_path, 32)
    x = np.full((1, 32, 8, 8), 2.5, dtype=np.float32)
    prediction = get_target(name).predict(Artifact("mlpackage", str(package)), {"x": x})
    (out,) = prediction.outputs.values()
    np.testing.assert_allclose(out, 2.5 + np.log(32), rtol=2e-3)
    assert "reduce_log_sum_exp" in prediction.op_types.values()
    assert set(prediction.placement.values()) <= {"cpu", "gpu", "ne", "unknown"}
    if name == "coreml:cpu":
        assert set(prediction.placement.values()) == {"cpu"}


# ----------------------------------------------------------- macOS CI (macos.yml) ----
# Hosted macOS runners (virtual machines) run the CPU path and the tests above; the
# ``macos_device`` tests need the Neural Engine and a GPU and run on the self-hosted
# Apple-silicon runner (NEBISECT_DEVICE_TESTS=1; see tests/conftest.py).
NEBISECT = [sys.executable, "-m", "nebisect"]


def _run_json(*args: str, cwd: Path | None = None) -> tuple[int, dict]:
    done = subprocess.run([*NEBISECT, "run", *args, "--json"], capture_output=True, text=True,
                          timeout=1800, cwd=cwd)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def _rows(report: dict, target: str) -> list[dict]:
    return [r for r in report["rows"] if r["target"] == target and r["role"] == "target"]


@pytest.mark.macos
@needs_coreml
def test_cache_key_and_float64_inputs_on_cpu(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from nebisect.arrays import save_npz, sha256_path
    from nebisect.case import Case
    from nebisect.evaluate.judge import evaluate

    monkeypatch.setenv("NEBISECT_CACHE", str(tmp_path / "cache"))
    package = _logsumexp_package(tmp_path, 32)
    inputs = tmp_path / "x.npz"
    save_npz(inputs, {"x": np.full((1, 32, 8, 8), 2.5, dtype=np.float64)})
    case = Case(SourceRef("mlpackage", str(package)), "coreml:cpu", inputs_path=str(inputs),
                model_sha256=sha256_path(package))
    verdict = evaluate(case).verdict
    assert verdict.status == "pass", verdict.message
    assert verdict.target_facts.notes == [
        "input x: cast float64 → float32 as the model's description asks"]
    compiled = list((tmp_path / "cache" / "compiled").iterdir())
    assert len(compiled) == 1 and compiled[0].name != f"{sha256_path(package)}.mlmodelc"


@pytest.mark.macos
@needs_coreml
def test_fork_mode_is_refused_here() -> None:
    done = subprocess.run([*NEBISECT, "fuzz", "--op", "softplus", "--target", "sim:fp16",
                           "--budget", "2", "--isolation", "fork"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert "isolation mode fork is refused on macOS" in done.stderr


@pytest.mark.macos
@needs_coreml
def test_real_segfault_in_a_child_is_a_crash_with_its_crash_report() -> None:
    import fault_jobs

    from nebisect.isolate import Job, run_isolated

    outcome = run_isolated(Job(f"{fault_jobs.__name__}:segfault", {}, stage="predict"))
    verdict = outcome.verdict
    assert (verdict.status, verdict.signature, verdict.stage) == (
        "crash", "crash:SIGSEGV", "predict")
    report = verdict.process.crash_report
    assert report is not None, "no .ips report found for the crashed child"
    assert "SIGSEGV" in report["exception"] and report["frames"]


@pytest.mark.macos
@pytest.mark.macos_device
@needs_coreml
def test_fp32_logsumexp_on_the_neural_engine_is_unrouted(tmp_path: Path) -> None:
    """fp32 cannot run on the Neural Engine: Core ML falls back to the CPU, and a pass
    there is ``unrouted``, not a Neural Engine pass (seed 003's fp32 row)."""
    from coremltools.converters.mil import Builder as mb

    from nebisect.arrays import save_npz
    from nebisect.case import Case, CaseOptions
    from nebisect.evaluate.judge import evaluate
    from nebisect.mil.load import save_program

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 32, 8, 8))])
    def prog(x):  # type: ignore[no-untyped-def]
        return mb.reduce_log_sum_exp(x=x, axes=[1], keep_dims=True)

    package = tmp_path / "lse_fp32.mlpackage"
    save_program(prog, package)
    inputs = tmp_path / "x.npz"
    save_npz(inputs, {"x": np.full((1, 32, 8, 8), 2.5, np.float32)})
    case = Case(SourceRef("mlpackage", str(package)), "coreml:ne", inputs_path=str(inputs),
                options=CaseOptions(op_of_interest="reduce_log_sum_exp"))
    verdict = evaluate(case).verdict
    assert (verdict.status, verdict.signature) == ("unrouted", "unrouted:reduce_log_sum_exp")
    assert "not on ne" in verdict.message or "not in the program" in verdict.message


@pytest.mark.macos
@pytest.mark.macos_device
@pytest.mark.slow
def test_seed_000_logsumexp_collapses_on_the_neural_engine(tmp_path: Path) -> None:
    """Seed 000: x = 8 > log(65504/32) ≈ 7.62 → the NE's lse collapses to 0.0."""
    from nebisect.arrays import save_npz

    inputs = tmp_path / "x8.npz"
    save_npz(inputs, {"x": np.full((1, 1, 8, 8), 8.0, np.float32)})
    code, report = _run_json("examples/logsumexp_ne.py:model", "-t", "coreml:ne",
                             "-t", "coreml:cpu", "--inputs", str(inputs))
    assert code == 1
    (ne,) = _rows(report, "coreml:ne")
    assert ne["verdict"]["signature"] == "mismatch:collapse", ne
    assert ne["attribution"] == "device"
    (cpu,) = _rows(report, "coreml:cpu")
    assert cpu["verdict"]["status"] == "pass"


@pytest.mark.macos
@pytest.mark.macos_device
@pytest.mark.slow
@pytest.mark.parametrize("target", ["coreml:ne", "coreml:all"])
def test_seed_003_meanpool_fails_as_a_verdict_off_the_cpu(target: str) -> None:
    """Seed 003: the masked mean-pool off the CPU crashes, is refused with "Data-dependent
    shapes were disabled", or falls back to the CPU — each a verdict, never a pass."""
    code, report = _run_json("examples/meanpool.py:model", "-t", target, "-t", "coreml:cpu",
                             "--lengths", "8")
    assert code == 1
    rows = _rows(report, target)
    assert rows
    for row in rows:
        verdict = row["verdict"]
        assert verdict["status"] in ("crash", "error", "unrouted", "skipped"), verdict
        if verdict["status"] == "error":
            assert "Data-dependent" in verdict["message"] + verdict["stderr_tail"]
    assert all(r["verdict"]["status"] == "pass" for r in _rows(report, "coreml:cpu"))

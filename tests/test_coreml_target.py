"""The real Core ML target. Prediction tests need macOS; they run in .github/workflows/macos.yml."""

from __future__ import annotations

import platform
from pathlib import Path

import numpy as np
import pytest

from nebisect.targets import get_target

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
    from nebisect.artifact import Artifact

    package = _logsumexp_package(tmp_path, 32)
    x = np.full((1, 32, 8, 8), 2.5, dtype=np.float32)
    prediction = get_target(name).predict(Artifact("mlpackage", str(package)), {"x": x})
    (out,) = prediction.outputs.values()
    np.testing.assert_allclose(out, 2.5 + np.log(32), rtol=2e-3)
    assert "reduce_log_sum_exp" in prediction.op_types.values()
    assert set(prediction.placement.values()) <= {"cpu", "gpu", "ne", "unknown"}
    if name == "coreml:cpu":
        assert set(prediction.placement.values()) == {"cpu"}

"""Compression as an attribution: ``run COMPRESSED --baseline ORIGINAL``.

One small MLP, compressed two ways by coremltools' optimizers (built at test time,
:mod:`support.compressed_packages`): 2-bit palettization moves its outputs by about a
third of their scale and is one ``compression`` finding naming the layers whose weights
must stay uncompressed; int8 linear quantization moves them by under 1 % and passes,
its error measured beside fp16's own.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import REPO
from support.compressed_packages import LAYERS, save_mlps

from nebisect import api
from nebisect.errors import NebisectError
from nebisect.evaluate.compression import DEFAULT_TOLERANCE, relative_error
from nebisect.mil.compressed import baseline_values, compressed_weights, restored


@pytest.fixture(scope="module")
def mlps(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return save_mlps(tmp_path_factory.mktemp("mlps"))


def _run(package: Path, baseline: Path, **options: object) -> api.RunResult:
    result = api.run(str(package), baseline=str(baseline), explore="none", progress=False,
                     **options)
    assert isinstance(result, api.RunResult)
    return result


def test_weights_are_named_by_the_op_reading_them_and_restoring_all_is_the_baseline(
        mlps: dict[str, Path]) -> None:
    from nebisect.mil.interp import compile_program
    from nebisect.mil.load import load_program

    package, baseline = load_program(mlps["pal2"]), load_program(mlps["base"])
    weights = compressed_weights(package.functions["main"])
    assert [(w.op, w.input, w.how, w.shape) for w in weights] == [
        (LAYERS[0], "weight", "2-bit palettized", (64, 16)),
        (LAYERS[1], "weight", "2-bit palettized", (64, 64)),
        (LAYERS[2], "weight", "2-bit palettized", (8, 64))]
    exact, base = compile_program(package, "fp64"), compile_program(baseline, "fp64")
    values = baseline_values(base, {}, baseline.functions["main"], weights)
    x = {"x": np.random.default_rng(0).standard_normal((1, 16)).astype(np.float32)}
    expected = base.run(x).outputs
    assert relative_error(restored(exact, values).run(x).outputs, expected)[0] == 0.0
    assert relative_error(restored(exact, {}).run(x).outputs, expected)[0] > DEFAULT_TOLERANCE
    int8 = compressed_weights(load_program(mlps["q8"]).functions["main"])
    assert {w.how for w in int8} == {"int8 linear-quantized"}


def test_relative_error_is_on_the_scale_of_each_output() -> None:
    reference = {"a": np.array([10.0, -20.0]), "b": np.array([0.5, 0.0])}
    outputs = {"a": np.array([11.0, -20.0]), "b": np.array([0.5, 0.1])}
    assert relative_error(outputs, reference) == pytest.approx((0.2, 1.0))
    assert relative_error({"a": np.array([np.nan, 0.0])}, {"a": np.array([1.0, 0.0])})[0] == (
        float("inf"))


def test_two_bit_palettization_is_one_compression_finding_naming_the_layers(
        mlps: dict[str, Path], tmp_path: Path) -> None:
    result = _run(mlps["pal2"], mlps["base"], save_triggers=tmp_path)
    assert not result.ok
    [finding] = result.findings
    assert finding.attribution == "compression"
    assert finding.op_type == "linear"
    check = result.report.compression
    assert check is not None
    # every layer must stay uncompressed: each alone keeps the output past 5 %
    assert [w.op for w in check.restore] == list(LAYERS)
    assert check.complete and check.stats is not None and check.stats.evaluations == 7
    [error] = check.errors
    assert 0.3 < error.compression < 0.4
    assert error.fp16 < 1e-3 and error.restored == 0.0
    assert finding.title.startswith(
        f'compression: 2-bit palettized weights of linear "{LAYERS[0]}", linear "{LAYERS[1]}", '
        f'linear "{LAYERS[2]}" move the outputs by 35% of their scale')
    assert "keeping them uncompressed passes (0%, 7 evaluations)" in finding.title
    # neither 2 bits per 16 channels nor 4 bits pass here; 8 bits does
    assert check.milder == "8-bit palettization" and check.milder_error < 0.01
    assert finding.title.endswith("; so does 8-bit palettization of them (≈0.549%)")
    # the devices agree with the compressed program's own exact evaluation
    assert [r.target for r in result.report.rows if r.verdict.failed] == ["sim:fp64"]
    # its next step reruns the comparison (there is no program failure to bisect)
    assert result.triggers is not None
    assert result.triggers.triggers[0].commands == [
        f"nebisect run {mlps['pal2']} --baseline {mlps['base']} --inputs {tmp_path}/1.npz "
        "--explore none"]


def test_ddmin_names_only_the_layer_whose_compression_the_divergence_enters(
        mlps: dict[str, Path]) -> None:
    result = _run(mlps["mixed"], mlps["base"])
    [finding] = result.findings
    check = result.report.compression
    assert check is not None and check.stats is not None
    assert [w.how for w in check.weights] == [
        "8-bit palettized", "2-bit palettized", "8-bit palettized"]
    assert [w.op for w in check.restore] == [LAYERS[1]] and check.stats.evaluations == 4
    [error] = check.errors
    assert error.compression > 0.3 and error.restored < 0.005
    assert finding.title.startswith(
        f'compression: 2-bit palettized weights of linear "{LAYERS[1]}" move the outputs')
    assert "keeping it uncompressed passes" in finding.title


def test_int8_quantization_passes_with_its_error_measured(mlps: dict[str, Path]) -> None:
    result = _run(mlps["q8"], mlps["base"])
    assert result.ok and result.findings == []
    check = result.report.compression
    assert check is not None and check.restore == [] and check.stats is None
    [error] = check.errors
    assert 1e-3 < error.compression < 1e-2
    assert error.restored == -1.0


def test_a_looser_tolerance_passes_two_bits(mlps: dict[str, Path]) -> None:
    result = _run(mlps["pal2"], mlps["base"], compression_tolerance="0.5")
    assert result.ok and result.report.compression is not None


@pytest.mark.parametrize(("baseline", "tolerance", "message"), [
    ("other", "0.05", "--baseline {other}: its inputs and outputs do not match the package's"),
    ("missing", "0.05", "--baseline {missing}: {missing}: no such file or directory"),
    ("base", "0", "--compression-tolerance '0': give a positive fraction"),
    ("base", "nan", "--compression-tolerance 'nan': give a positive fraction"),
])
def test_a_bad_baseline_or_tolerance_is_one_line_exit_2(
        mlps: dict[str, Path], baseline: str, tolerance: str, message: str) -> None:
    paths = {**{k: str(v) for k, v in mlps.items()}, "missing": str(mlps["base"]) + ".gone"}
    done = subprocess.run([sys.executable, "-m", "nebisect", "run", str(mlps["pal2"]),
                           "--baseline", paths[baseline], "--compression-tolerance", tolerance,
                           "--explore", "none"], capture_output=True, text=True, cwd=REPO,
                          timeout=300)
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message.format(**paths) in lines[0], done.stderr


def test_an_uncompressed_source_or_a_torch_one_has_nothing_to_compare(
        mlps: dict[str, Path]) -> None:
    with pytest.raises(NebisectError, match="has no compressed weights"):
        _run(mlps["base"], mlps["base"])
    with pytest.raises(NebisectError, match=r"the source must be a compressed \.mlpackage"):
        _run(Path("examples/meanpool.py:model"), mlps["base"])

"""``run file.py:factory --compress SPEC``: a torch source's conversion, compressed.

The seeded MLP of :mod:`support.compressed_packages`, as a factory: converted (fp16,
torch.export) and compressed by coremltools' optimizers with their defaults, which
leave weights under 2048 elements alone — so only the middle Linear(64, 64) is
compressed. 2-bit palettization moves the outputs by a third of their scale and is one
``compression`` finding at that layer, as ``run COMPRESSED --baseline ORIGINAL`` makes
it; int8 linear quantization moves them by 0.3 % and passes, the error in the JSON.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO
from support.compressed_packages import LAYERS

from nebisect import api
from nebisect.errors import NebisectError
from nebisect.evaluate.compression import DEFAULT_TOLERANCE
from nebisect.sources.compress import FORMS, parse_compress

FACTORY = "tests/support/compressed_packages.py:mlp"


def _cli(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nebisect", "run", *arguments],
                          capture_output=True, text=True, cwd=REPO, timeout=300)


def test_specs_are_checked_and_said_back_plainly() -> None:
    assert [parse_compress(text).text for text in (
        "palettize:4", "palettize:2", "quantize:int8", "quantize:int4", "prune:0.50")] == [
        "palettize:4", "palettize:2", "quantize:int8", "quantize:int4", "prune:0.5"]
    assert parse_compress("palettize:6").bits == 6
    assert parse_compress("prune:0.75").sparsity == 0.75


def test_two_bit_palettization_is_one_compression_finding_at_the_compressed_layer(
        tmp_path: Path) -> None:
    done = _cli(FACTORY, "--compress", "palettize:2", "-t", "sim:fp32", "--explore", "none",
                "--json", "--save-triggers", str(tmp_path))
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["source"] == str(REPO / FACTORY)
    assert report["compressed"] == {"spec": "palettize:2", "path": "export",
                                    "precision": "fp16"}
    [finding] = report["findings"]
    assert finding["attribution"] == "compression"
    check = report["compression"]
    assert check["baseline"] == "its uncompressed torch.export conversion"
    # coremltools' default weight_threshold (2048) compresses the 64×64 layer alone
    assert [w["op"] for w in check["weights"]] == [LAYERS[1]]
    assert [w["op"] for w in check["restore"]] == [LAYERS[1]]
    [error] = check["errors"]
    assert 0.3 < error["compression"] < 0.4 and error["restored"] == 0.0
    assert check["milder"] == "8-bit palettization"
    title = next(g for g in report["groups"] if g["attribution"] == "compression")["message"]
    assert title.startswith(f'2-bit palettized weights of linear "{LAYERS[1]}" move the '
                            "outputs by 33.4% of their scale")
    # the trigger is rerun the way it was made: the factory, compressed again
    [trigger] = json.loads((tmp_path / "triggers.json").read_text())["triggers"]
    assert trigger["commands"] == [
        f"nebisect run {FACTORY} --compress palettize:2 --inputs {tmp_path}/1.npz "
        "--explore none"]
    assert not (tmp_path / "compressed.mlpackage").exists()


def test_int8_quantization_passes_with_its_error_in_the_json() -> None:
    done = _cli(FACTORY, "--compress", "quantize:int8", "-t", "sim:fp32", "--explore", "none",
                "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["findings"] == [] and report["compressed"]["spec"] == "quantize:int8"
    check = report["compression"]
    assert check["tolerance"] == DEFAULT_TOLERANCE and check["restore"] == []
    assert [w["how"] for w in check["weights"]] == ["int8 linear-quantized"]
    [error] = check["errors"]
    assert 1e-3 < error["compression"] < 5e-3 < DEFAULT_TOLERANCE
    assert report["conversions"]["fp16"]["status"] == "pass"


@pytest.mark.parametrize(("arguments", "message"), [
    ((FACTORY, "--compress", "palettize:0"), f"--compress 'palettize:0': give {FORMS}"),
    ((FACTORY, "--compress", "quantize:int3"), f"--compress 'quantize:int3': give {FORMS}"),
    ((FACTORY, "--compress", "prune:1.5"), f"--compress 'prune:1.5': give {FORMS}"),
    ((FACTORY, "--compress", "zip:3"), f"--compress 'zip:3': give {FORMS}"),
    (("model.mlpackage", "--compress", "palettize:4"),
     "--compress palettize:4: model.mlpackage is not a torch source — compress the "
     "package yourself (coremltools.optimize.coreml) and judge it with nebisect run "
     "COMPRESSED.mlpackage --baseline model.mlpackage"),
    ((FACTORY, "--compress", "palettize:4", "--baseline", "model.mlpackage"),
     "--compress palettize:4 makes its own baseline (the source's uncompressed conversion): "
     "drop --baseline model.mlpackage"),
], ids=["palettize:0", "quantize:int3", "prune:1.5", "zip:3", "a package", "with --baseline"])
def test_a_bad_spec_or_source_is_one_line_exit_2(arguments: tuple[str, ...],
                                                 message: str) -> None:
    done = _cli(*arguments, "--explore", "none")
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines == [f"nebisect: error: {message}"], done.stderr


def test_a_model_with_no_weight_coremltools_compresses_is_an_error() -> None:
    with pytest.raises(NebisectError, match=(
            r"^--compress palettize:4: coremltools compressed no weight: it leaves weights "
            r"of fewer than 2048 elements as they are")):
        api.run("examples/meanpool.py:model", compress="palettize:4", target="sim:fp32",
                explore="none", progress=False)


def test_a_source_that_does_not_convert_has_nothing_to_compress(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(
        "import torch\n\n\n"
        "class Lgamma(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.lgamma(x.abs() + 1.0)\n\n\n"
        "def model():\n"
        "    return {'module': Lgamma(), 'example_inputs': (torch.ones(1, 4),)}\n")
    with pytest.raises(NebisectError) as raised:
        api.run(f"{tmp_path}/model.py:model", compress="quantize:int8", target="sim:fp32",
                explore="none", progress=False)
    message = str(raised.value)
    assert message.startswith(f"--compress quantize:int8: {tmp_path}/model.py:model does not "
                              "convert, so there is nothing to compress (torch.export: ")
    assert message.endswith("; run it without --compress to judge its conversion")
    assert "\n" not in message


def test_a_failure_of_the_compressed_package_itself_is_bisected_on_a_copy_of_it(
        tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(
        "import torch\n\n\n"
        "class Loud(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        torch.manual_seed(0)\n"
        "        self.linear = torch.nn.Linear(64, 64)\n\n"
        "    def forward(self, x):\n"
        "        return self.linear(x) * 1e6\n\n\n"
        "def model():\n"
        "    return {'module': Loud().eval(), 'example_inputs': (torch.randn(1, 64),)}\n")
    triggers = tmp_path / "triggers"
    result = api.run(f"{tmp_path}/model.py:model", compress="quantize:int8", target="sim:fp16",
                     explore="none", save_triggers=triggers, progress=False)
    assert isinstance(result, api.RunResult) and not result.ok
    # int8 moves the outputs by well under the tolerance; fp16 overflows them
    [finding] = result.findings
    assert finding.attribution == "precision"
    check = result.report.compression
    assert check is not None and check.failing == []
    # the run's workdir is gone: the trigger's commands name a copy of the package
    assert result.triggers is not None
    package = triggers / "compressed.mlpackage"
    assert (package / "Manifest.json").is_file()
    assert result.triggers.triggers[0].commands[0] == (
        f"nebisect bisect {package} -t sim:fp16 --inputs {triggers}/1.npz "
        f"--out {triggers}/bisect-1")

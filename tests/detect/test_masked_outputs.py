"""Padded positions are nobody's bug, for packages as for torch sources (issue 43): a
package's masked outputs are inferred from its graph's shapes, and ``run
--masked-output OUTPUT=MASK`` declares them for either."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import SUPPORT
from support.masked_packages import PADDED_ELEMENTS, PADDED_INPUTS, save_padded_packages

import nebisect
from nebisect.arrays import save_npz
from nebisect.sources.resolve import resolve_source

NEBISECT = [sys.executable, "-m", "nebisect"]
TORCH_UNMASKED = f"{SUPPORT}/domain_models.py:padded_unmasked"


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return save_padded_packages(tmp_path_factory.mktemp("masked"))


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The padded inputs as each source takes them: an int32 mask, or a float32 one."""
    directory = tmp_path_factory.mktemp("inputs")
    saved = {}
    for kind, dtype in (("int", np.int32), ("float", np.float32)):
        saved[kind] = str(directory / f"{kind}.npz")
        save_npz(saved[kind], {**PADDED_INPUTS,
                               "attention_mask": PADDED_INPUTS["attention_mask"].astype(dtype)})
    return saved


def _run(source: str, npz: str, *options: str, as_json: bool = True
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NEBISECT, "run", source, "-t", "sim:fp16", "--convert", "export",
                           "--explore", "none", "--inputs", npz, *options,
                           *(["--json"] if as_json else [])],
                          capture_output=True, text=True, timeout=600)


def _fp16(report: dict[str, Any]) -> dict[str, Any]:
    (verdict,) = [r["verdict"] for r in report["rows"] if r["target"] == "sim:fp16"]
    return verdict  # type: ignore[no-any-return]


@pytest.mark.parametrize(("variant", "masked"), [
    ("int", {"out": "attention_mask"}),
    # the mask's, the hidden states' and the output's sequence: three symbols
    ("flexible", {"out": "attention_mask"}),
    ("float", {}),  # a float input has no role the graph tells: no mask
])
def test_a_package_infers_which_outputs_follow_its_mask(packages: dict[str, Path], variant: str,
                                                        masked: dict[str, str]) -> None:
    source = resolve_source(str(packages[variant]))
    assert source.outputs == ["out"]
    assert source.masked_outputs == masked
    assert source.masks_inferred is bool(masked)


@pytest.mark.parametrize(("variant", "options", "code", "masked", "inferred"), [
    # nothing says which output follows a mask: the padded positions overflow fp16
    ("float", [], 1, {}, False),
    # the graph reads the int mask as one, and `out` follows its [batch, seq]
    ("int", [], 0, {"out": "attention_mask"}, True),
    # declared a range, it is no mask: nothing follows it
    ("int", ["--input-range", "attention_mask=0:1"], 1, {}, False),
    ("float", ["--input-range", "attention_mask=mask", "--masked-output", "out=attention_mask"],
     0, {"out": "attention_mask"}, False),
])
def test_padded_positions_of_a_package(packages: dict[str, Path], inputs: dict[str, str],
                                       variant: str, options: list[str], code: int,
                                       masked: dict[str, str], inferred: bool) -> None:
    done = _run(str(packages[variant]), inputs[variant], *options)
    assert done.returncode == code, done.stdout[-3000:] + done.stderr
    report = json.loads(done.stdout)
    assert report["masked_outputs"] == masked and report["masks_inferred"] is inferred
    verdict = _fp16(report)
    if code == 0:
        assert verdict["status"] == "pass"
        assert verdict["metrics"]["masked"] == {"out": PADDED_ELEMENTS}
    else:
        assert verdict["signature"] == "mismatch:nonfinite"
        assert "masked" not in verdict["metrics"]


def test_the_report_says_whether_masks_were_inferred_or_declared(
        packages: dict[str, Path], inputs: dict[str, str]) -> None:
    inferred = _run(str(packages["int"]), inputs["int"], as_json=False)
    assert inferred.returncode == 0, inferred.stdout + inferred.stderr
    assert ("padded positions not compared (inferred from their [batch, seq, …] shapes): "
            "out by attention_mask") in " ".join(inferred.stdout.split())
    declared = _run(str(packages["int"]), inputs["int"], "--masked-output",
                    "out=attention_mask", as_json=False)
    assert declared.returncode == 0, declared.stdout + declared.stderr
    assert ("padded positions not compared (as declared): out by attention_mask"
            in " ".join(declared.stdout.split()))


def test_the_api_takes_masked_output_as_the_cli_does(packages: dict[str, Path],
                                                     inputs: dict[str, str]) -> None:
    result = nebisect.run(str(packages["float"]), target="sim:fp16", explore="none",
                          inputs=inputs["float"], input_range=["attention_mask=mask"],
                          masked_output=["out=attention_mask"], progress=False)
    assert isinstance(result, nebisect.RunResult) and result.ok
    assert result.report.masked_outputs == {"out": "attention_mask"}
    assert result.report.masks_inferred is False


@pytest.mark.parametrize(("options", "masked"), [
    ([], {}),  # the factory says no output follows the mask
    (["--masked-output", "last_hidden_state=attention_mask"],
     {"last_hidden_state": "attention_mask"}),
])
def test_masked_output_declares_a_torch_factorys(inputs: dict[str, str], options: list[str],
                                                 masked: dict[str, str]) -> None:
    """Compared, the padded positions overflow fp16 — in torch's own fp16 too, so the
    finding is a note (exit 0 either way); declared masked, they are not compared."""
    done = _run(TORCH_UNMASKED, inputs["int"], *options)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    report = json.loads(done.stdout)
    assert report["masked_outputs"] == masked and report["masks_inferred"] is False
    verdict = _fp16(report)
    if masked:
        assert verdict["metrics"]["masked"] == {"last_hidden_state": PADDED_ELEMENTS}
        assert "shared_with_torch" not in report
    else:
        assert verdict["signature"] == "mismatch:nonfinite"
        assert [note["symptom"] for note in report["shared_with_torch"]] == ["nonfinite"]


@pytest.mark.parametrize(("source", "given", "message"), [
    ("torch", ["nope=attention_mask"],
     "--masked-output names 'nope', not an output (last_hidden_state)"),
    ("torch", ["last_hidden_state=hidden"],
     "--masked-output last_hidden_state=hidden: 'hidden' is not a mask input (attention_mask); "
     "declare one with --input-range NAME=mask"),
    ("int", ["out=hidden"],
     "--masked-output out=hidden: 'hidden' is not a mask input (attention_mask); declare one "
     "with --input-range NAME=mask"),
    ("float", ["out=attention_mask"],
     "--masked-output out=attention_mask: 'attention_mask' is not a mask input (none declared)"),
    ("int", ["out"], "--masked-output 'out': write OUTPUT=MASK (e.g. "
     "last_hidden_state=attention_mask)"),
    ("int", ["out=attention_mask", "out=attention_mask"], "--masked-output: 'out' is given twice"),
])
def test_a_wrong_masked_output_is_one_line(packages: dict[str, Path], inputs: dict[str, str],
                                           source: str, given: list[str], message: str) -> None:
    where = TORCH_UNMASKED if source == "torch" else str(packages[source])
    npz = inputs["float" if source == "float" else "int"]
    done = _run(where, npz, *(arg for text in given for arg in ("--masked-output", text)))
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert message in line

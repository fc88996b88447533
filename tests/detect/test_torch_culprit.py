"""A real converter bug's conversion culprit is where torch and the converted program
first diverge: ``nn.TransformerEncoder``'s key-padding mask, whose ``zeros_like`` loses its
dtype on torch.export (``examples/found/key_padding_mask_export.py``), is blamed on the
``select`` that builds the mask — not on the ``layer_norm`` that shows it at the output."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import REPO

import nebisect

EXAMPLE = REPO / "examples" / "found" / "key_padding_mask_export.py"


def _trigger() -> dict[str, np.ndarray]:
    spec = importlib.util.spec_from_file_location("key_padding_mask_export", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.TRIGGER)


def _run(tmp_path: Path) -> dict[str, Any]:
    inputs = tmp_path / "trigger.npz"
    np.savez(inputs, **_trigger())
    # the converter overrides from the start: on NumPy >= 2.4 jit.trace fails at
    # coremltools' defaults (aten::Int), a finding of its own this test is not about
    result = nebisect.run(f"{EXAMPLE}:model", inputs=str(inputs), explore="none",
                          target=["sim:fp64"], converter_overrides=True, jobs=1,
                          progress=False)
    return dict(json.loads(result.to_json()))


@pytest.mark.slow
def test_a_padding_mask_kept_bool_is_blamed_on_the_select_that_builds_it(
        tmp_path: Path) -> None:
    report = _run(tmp_path)
    (finding,) = report["findings"]
    assert (finding["attribution"], finding["symptom"], finding["op_type"], finding["paths"]) \
        == ("conversion", "tolerance", "select", ["export"])
    assert finding["title"].startswith("conversion: select is off beyond tolerance")
    (group,) = finding["groups"]
    culprit = group["culprit"]
    assert (culprit["op"], culprit["op_type"], culprit["matched"]) == (
        "masked_fill", "select", True)
    assert culprit["compared"].startswith("intermediates against torch")
    assert culprit["compared"].endswith(
        "node it is named after reaches the outputs, masked_fill: dtype bool where the "
        "reference is float64")
    # jit.trace keeps the dtype: it converts, and right
    verdicts = {row["path"]: row["verdict"]["signature"] for row in report["rows"]
                if row["target"] == "sim:fp64"}
    assert verdicts == {"export": "mismatch:tolerance", "trace": "pass"}

"""What nebisect cannot model is never a finding: a package with an op the simulator
has no kernel for (``non_maximum_suppression``, iOS 17) is one ``cannot judge`` line and
exit 2 — never ``device``, ``precision`` or ``conversion`` (it once was a ``device``
finding, exit 1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

from nebisect.mil.quiet import import_coremltools, quiet

GAP = ("cannot judge: the simulator has no kernel for MIL op 'non_maximum_suppression' "
       "(sim:fp32, sim:fp16, sim:ane)")


@pytest.fixture(scope="module")
def nms_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ct = import_coremltools()
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import types

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 8, 4), dtype=types.fp32),
                             mb.TensorSpec(shape=(1, 8, 2), dtype=types.fp32)],
                opset_version=ct.target.iOS17)
    def prog(boxes, scores):
        kept, kept_scores, _ = mb.non_maximum_suppression(
            boxes=boxes, scores=scores, iou_threshold=0.5, max_boxes=4)
        return mb.relu(x=kept), kept_scores

    path = tmp_path_factory.mktemp("gap") / "nms.mlpackage"
    with quiet():
        ct.convert(prog, convert_to="mlprogram",
                   minimum_deployment_target=ct.target.iOS17).save(str(path))
    return path


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_a_missing_kernel_is_one_line_never_a_finding(nms_package: Path, extra: list[str]
                                                      ) -> None:
    done = subprocess.run([sys.executable, "-m", "nebisect", "run", str(nms_package), *extra],
                          capture_output=True, text=True, timeout=600, cwd=REPO)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"nebisect: error: {GAP}"]
    assert done.stdout == ""


def test_the_api_raises_the_same_line(nms_package: Path) -> None:
    import nebisect

    with pytest.raises(nebisect.NebisectError) as raised:
        nebisect.run(str(nms_package))
    assert str(raised.value) == GAP

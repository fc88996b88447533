"""The bug classes ``run`` used to drop (issue #23, items 2–4).

* A conversion that fails on one path while the other converts is a failure of the run
  (one ``conversion`` group on that path, the other path's verdicts beside it), and a
  ``forward`` that returns its input converts on both paths.
* Integer outputs are compared exactly: a device that routes an int32 through float32
  is ``mismatch:integer``, found by the ``bigints`` family at 2^24.
* Placement off the Neural Engine is a note in ``run``, a failure with ``--require ne``.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

from support import REPO, SUPPORT
from support.one_path_override import REFUSAL

from nebisect.detect.discover import Discovery
from nebisect.detect.matrix import MatrixRunner
from nebisect.detect.summary import finding_lines
from nebisect.executors.runner import Runner
from nebisect.isolate import Isolator
from nebisect.isolation.timeouts import Timeouts
from nebisect.sources.convert import convert_paths
from nebisect.sources.resolve import resolve_source
from nebisect.targets.plugins import parse_targets
from nebisect.targets.spec import TargetSpec

NEBISECT = [sys.executable, "-m", "nebisect"]
ADD_ONE = f"{SUPPORT / 'integer_models.py'}:add_one"


def test_a_conversion_failing_on_one_path_is_a_conversion_failure_there(
        tmp_path: Path, isolator: Isolator) -> None:
    source = resolve_source(f"{SUPPORT / 'one_path_override.py'}:model", isolator=isolator)
    convert = functools.partial(convert_paths, setup=("support.one_path_override:refuse_trace",))
    report = MatrixRunner(source, [TargetSpec.parse("sim:fp32"), TargetSpec.parse("sim:fp16")],
                          tmp_path,
                          Runner(isolator=isolator),
                          convert=convert).run((2,))
    assert report.failed  # what makes `run` exit 1
    (finding,) = report.findings  # one finding, though both conversions (fp32, fp16) show it
    assert (finding.attribution, finding.symptom, finding.paths) == (
        "conversion", "error", ["trace"])
    assert finding.targets == ["sim:fp32", "sim:fp16"]
    for group in finding.groups:
        assert group.signature == f"error:convert:jit.trace: NotImplementedError: {REFUSAL}"
    for target in ("sim:fp32", "sim:fp16"):
        rows = {r.path: r for r in report.rows if r.target == target}
        assert list(rows) == ["export", "trace"]
        assert rows["export"].verdict.status == "pass"
        assert (rows["trace"].verdict.stage, rows["trace"].role) == ("convert", "target")
        assert rows["trace"].verdict.message == (
            f"conversion fails on jit.trace only: NotImplementedError: {REFUSAL}; "
            "torch.export: pass")
    title = finding_lines(finding)[0]
    assert f"conversion: conversion fails on jit.trace only: NotImplementedError: {REFUSAL}" \
        in title


def test_a_forward_returning_its_input_converts_on_both_paths(
        tmp_path: Path, isolator: Isolator) -> None:
    source = resolve_source(f"{SUPPORT / 'one_path_override.py'}:identity", isolator=isolator)
    report = MatrixRunner(source, [TargetSpec.parse("sim:fp32")], tmp_path,
                          Runner(isolator=isolator),
                          convert=convert_paths).run((2,))
    assert not report.failed, [r.verdict.message for r in report.rows]
    conversion = report.conversions["fp32"]
    assert conversion.conversion.paths == ["export", "trace"]
    assert all("returned an input unchanged" in a["note"]
               for a in conversion.conversion.attempts)


def test_an_int32_routed_through_float32_is_an_integer_mismatch(
        tmp_path: Path, isolator: Isolator) -> None:
    source = resolve_source(ADD_ONE, isolator=isolator)
    plugins = [str(SUPPORT / "plugins_integers.py")]
    targets = parse_targets(["sim:fp32", "sim:fp32-int-via-fp32"], plugins,
                            timeout=Timeouts().load)
    runner = MatrixRunner(source, list(targets), tmp_path,
                          Runner(isolator=isolator),
                          convert=functools.partial(convert_paths, paths=("export",)),
                          paths=("export",),
                          plugins=plugins,
                          discovery=Discovery(budget=5, families=["bigints"]))
    report = runner.run((2,))
    (group,) = report.groups
    assert (group.target, group.signature) == ("sim:fp32-int-via-fp32", "mismatch:integer")
    assert group.smallest.label == "bigints(x=16777216)"
    assert group.message.endswith("output 16777216 vs reference 16777217")
    exact = [r for r in report.rows if r.target == "sim:fp32" and r.explored]
    assert exact and all(r.verdict.status == "pass" for r in exact)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NEBISECT, "run", ADD_ONE, "-t", "sim:ane", "--explore", "none",
                           "--lengths", "2", "--convert", "export", *args],
                          capture_output=True, text=True, cwd=REPO, timeout=600)


def test_placement_off_the_neural_engine_is_a_note_unless_required() -> None:
    noted = _run()
    assert noted.returncode == 0, noted.stdout + noted.stderr
    assert ("placement on sim:ane: 0/1 compute ops on ne; elsewhere: add ×1 (integer dtype) "
            "— a note, not a failure (run --require ne fails closed)") in noted.stdout
    required = _run("--require", "ne")
    assert required.returncode == 1, required.stdout + required.stderr
    assert "unrouted" in required.stdout
    wrong = _run("--require", "npu")
    assert wrong.returncode == 2 and "--require 'npu': one of ne, gpu" in wrong.stderr

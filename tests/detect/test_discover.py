"""``nebisect run`` goes looking (issue 12): example inputs, value families, guided probes,
model-level cliffs, both conversion paths, culprit ops, failure groups.

The real-model tests run the CLI on seed 000's model and its softplus twin with no
``--inputs``: the collapse must be found from the benign example (x = 2.5), attributed
to the device at the ``reduce_log_sum_exp`` op, and pinned to two adjacent fp16 values.
The quick tests use a one-op ``.mlpackage`` (no conversion) for the flags, determinism
and ``--explore none``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import REPO, SUPPORT

from nebisect.detect.discover import Discovery
from nebisect.detect.matrix import MatrixRunner, RunReport
from nebisect.executors.runner import Runner
from nebisect.isolate import Isolator
from nebisect.sources.resolve import resolve_source
from nebisect.targets.spec import TargetSpec

NEBISECT = [sys.executable, "-m", "nebisect"]


#: the CLI, saying on its last stderr line which heavy packages its own process imported
AUDITED = [sys.executable, "-c", (
    "import atexit, sys; from nebisect.cli import main; "
    "atexit.register(lambda: print('parent imported:', [m for m in ('coremltools', 'torch') "
    "if m in sys.modules], file=sys.stderr)); main()")]


def _cli(*args: str, audited: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*(AUDITED if audited else NEBISECT), *args], capture_output=True,
                          text=True, cwd=REPO, timeout=600)


def _json(*args: str, audited: bool = False) -> tuple[int, dict[str, Any]]:
    done = _cli("run", *args, "--json", audited=audited)
    assert done.returncode in (0, 1), done.stderr
    if audited:
        # coremltools (with torch, transformers, scipy: seconds of CPU) is imported only
        # in the templates; the run's own process reads programs through them
        assert done.stderr.strip().splitlines()[-1] == "parent imported: []", done.stderr
    return done.returncode, json.loads(done.stdout)


def _groups(report: dict[str, Any], target: str) -> list[dict[str, Any]]:
    return [g for g in report["groups"] if g["target"] == target]


def _failing_targets(report: dict[str, Any]) -> set[str]:
    return {r["target"] for r in report["rows"] if r["verdict"]["status"] not in ("pass",)}


def _cliff(group: dict[str, Any], family: str) -> dict[str, Any]:
    (found,) = [c for c in group["cliffs"] if c["family"] == family]
    return found


# ------------------------------------------------------------------ real models (slow)
@pytest.mark.slow
def test_seed_000_collapse_found_from_the_benign_example() -> None:
    code, report = _json("examples/logsumexp_ne.py:model", audited=True)
    assert code == 1
    assert _failing_targets(report) == {"sim:ane"}  # sim:fp16, sim:fp32 pass every input set
    example = [r for r in report["rows"] if r["input_set"]["label"] == "example"]
    assert example and {r["verdict"]["status"] for r in example} == {"pass"}
    groups = _groups(report, "sim:ane")
    assert {g["path"] for g in groups} == {"export", "trace"}
    for group in groups:
        assert (group["signature"], group["attribution"]) == ("mismatch:collapse", "device")
        assert group["culprit"]["op_type"] == "reduce_log_sum_exp"
        assert group["culprit"]["matched"] is True
        cliff = _cliff(group, "const")
        assert (cliff["cliff"]["lo"], cliff["cliff"]["hi"]) == (7.62109375, 7.625)
        assert cliff["complete"] and cliff["spent"] <= cliff["cliff"]["predictions"] <= 20
        assert cliff["cliff"]["predicted"]["label"] == "log(65504/32)"
        assert cliff["cliff"]["lo_output"] == pytest.approx(7.62109375 + np.log(32), abs=0.02)
        assert cliff["cliff"]["hi_output"] == 0.0
    spent = {t: e["spent"] for t, e in report["explorations"].items()}
    assert spent == {"sim:fp32": 40, "sim:fp16": 40, "sim:ane": 40}


@pytest.mark.slow
def test_seed_000_cliffs_printed_on_the_neural_engine_are_cliffs() -> None:
    # Before: beside the true bracket, "cliff in normal: x 5.125 | 5.12890625 (output
    # 3.47852 | 3.47852)" (both sides read at an element that never breaks) and "cliff in
    # signed: x 1.0 | 10.0 (3328 fp16 steps apart)" (a bracket the budget cut short).
    done = subprocess.run([*NEBISECT, "run", "examples/logsumexp_ne.py:model", "-t", "sim:ane"],
                          capture_output=True, text=True, cwd=REPO, timeout=600,
                          env={**os.environ, "COLUMNS": "400"})
    assert done.returncode == 1, done.stderr
    # Each cliff line of a finding names its target and path first: "sim:ane [jit.trace]: …"
    lines = [line.strip().partition("]: ")[2] for line in done.stdout.splitlines()
             if line.strip().startswith("sim:ane [")]
    cliffs = [line for line in lines if line.startswith("cliff in ")]
    assert any(line.startswith("cliff in const: x 7.62109375 | 7.625 (output ")
               for line in cliffs), done.stdout
    for line in cliffs:
        match = re.match(r"cliff in \w+: x \S+ \| \S+ \(output ([^\s|)]+) \| ([^\s|)]+)",
                         line)
        assert match is not None and match.group(1) != match.group(2), line
        assert "steps apart" not in line
    short = [line for line in lines if "steps apart" in line]
    assert all(line.startswith("failing from x ") for line in short), short


@pytest.mark.slow
def test_softplus_cliff_on_the_neural_engine() -> None:
    code, report = _json("examples/softplus_ne.py:model", "-t", "sim:ane")
    assert code == 1
    (export,) = [g for g in _groups(report, "sim:ane") if g["path"] == "export"]
    assert (export["attribution"], export["culprit"]["op_type"]) == ("device", "softplus")
    cliff = _cliff(export, "const")
    assert (cliff["cliff"]["lo"], cliff["cliff"]["hi"]) == (10.390625, 10.3984375)
    assert cliff["cliff"]["predicted"]["label"] == "ln 2^15"


@pytest.mark.slow
def test_seed_003_shape_error_once_per_group() -> None:
    done = _cli("run", "examples/meanpool.py:model", "-t", "sim:ane", "--budget", "12",
                "--strict-conversion")
    assert done.returncode == 1, done.stderr
    failures = [line for line in done.stdout.splitlines() if line.startswith("✗")]
    # the shape error once, and jit.trace's conversion failure (the overrides cure it;
    # --strict-conversion keeps it the end of that path)
    assert len(failures) == 2, failures
    (device,) = [line for line in failures if " device: the model fails at predict:" in line]
    assert "Data-dependent shapes were disabled" in device
    code, report = _json("examples/meanpool.py:model", "-t", "sim:ane", "--budget", "12",
                         "--strict-conversion")
    assert code == 1
    # beside jit.trace's conversion failure, the shape error is one group
    (group,) = [g for g in _groups(report, "sim:ane") if g["signature"].startswith("error:predict")]
    labels = [m["label"] for m in group["members"]]
    assert {"example", *(f"length({n})" for n in (2, 8, 37, 128, 380))} <= set(labels)
    assert len(labels) == len(set(labels)) > 6
    assert group["attribution"] == "device"


@pytest.mark.slow
def test_converter_override_on_one_path_is_a_conversion_bug_there_only(
    tmp_path: Path, isolator: Isolator
) -> None:
    from nebisect.sources.convert import convert_paths

    source = resolve_source(f"{SUPPORT / 'one_path_override.py'}:model", isolator=isolator)
    assert list(source.example or {}) == ["x"]  # a tuple, named by forward()'s parameter
    convert = functools.partial(convert_paths, setup=("support.one_path_override:install",))
    runner = MatrixRunner(source, [TargetSpec.parse("sim:fp64"), TargetSpec.parse("sim:fp32")],
                          tmp_path,
                          Runner(isolator=isolator),
                          convert=convert, discovery=Discovery(budget=2, families=["const"]))
    report = runner.run((2,))
    cells = {(r.target, r.path, r.input_set.label): r for r in report.rows if not r.explored}
    for target in ("sim:fp64", "sim:fp32"):
        assert cells[target, "export", "example"].verdict.status == "pass"
        broken = cells[target, "trace", "example"]
        assert (broken.verdict.signature, broken.attribution) == ("mismatch:tolerance",
                                                                   "conversion")
        assert broken.culprit is not None and broken.culprit.op_type == "sigmoid"
        assert not broken.culprit.matched  # its one value is the output: said, not invented
    assert {g.path for g in report.groups} == {"trace"}
    (finding,) = report.findings
    assert finding.attribution == "conversion" and finding.op_type == "sigmoid"
    assert finding.title.startswith("conversion: sigmoid is off beyond tolerance ")
    assert finding.title.endswith("(sim:fp32, sim:fp64; jit.trace only)")
    assert RunReport.from_dict(report.to_dict()).to_dict() == report.to_dict()


@pytest.mark.slow
def test_variadic_forward_inputs_are_named_by_position(tmp_path: Path,
                                                      isolator: Isolator) -> None:
    from nebisect.sources.convert import convert_paths

    source = resolve_source(f"{SUPPORT / 'one_path_override.py'}:variadic", isolator=isolator)
    assert [d.name for d in source.inputs] == ["x0", "x1"]
    assert source.example is not None and float(source.example["x1"][0, 0]) == 3.0
    runner = MatrixRunner(source, [TargetSpec.parse("sim:fp32")], tmp_path,
                          Runner(isolator=isolator),
                          convert=convert_paths, paths=("export",),
                          discovery=Discovery(budget=1))
    report = runner.run((2,))
    assert not report.failed
    assert [r.input_set.label for r in report.rows if not r.explored] == ["example", "example",
                                                                          "static", "static"]


# ------------------------------------------------------------------ quick: a package source
def _findings(report: dict[str, Any]) -> dict[str, Any]:
    """Everything but timings (and paths of the run's temporary files)."""
    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in ("timings", "stderr_tail")}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip({k: report[k] for k in ("rows", "groups", "explorations", "discovery")})


def test_same_seed_same_findings(lse: Path) -> None:
    args = (str(lse), "-t", "sim:ane", "--budget", "14", "--seed", "7")
    first, second = _json(*args, audited=True), _json(*args)
    assert first[0] == second[0] == 1
    assert _findings(first[1]) == _findings(second[1])
    (group,) = _groups(first[1], "sim:ane")
    assert group["culprit"]["op_type"] == "reduce_log_sum_exp" and group["path"] == ""
    assert len([r for r in first[1]["rows"] if r["explored"]]) == 14


def test_parallel_exploration_finds_what_one_job_finds(lse: Path) -> None:
    """Targets explored on two threads: the same rows, in the same order, and groups."""
    args = (str(lse), "-t", "sim:fp16", "-t", "sim:ane", "--budget", "10")
    (one_code, one), (two_code, two) = _json(*args, "--jobs", "1"), _json(*args, "--jobs", "2")
    assert one_code == two_code == 1
    assert _findings(one) == _findings(two)
    assert set(one["explorations"]) == {"sim:fp16", "sim:ane"}
    assert {"total", "conversion", "predictions", "reference"} <= set(two["timings"])


def test_jobs_default_to_the_cores_this_process_may_use() -> None:
    from nebisect.isolation.threads import cores

    assert cores() == len(os.sched_getaffinity(0))


def test_explore_none_is_todays_matrix(lse: Path) -> None:
    """The rows the base commit's ``run`` made for this package: one per target, no
    example (a package has none), no explored rows, no groups beyond the matrix's."""
    code, report = _json(str(lse), "--explore", "none")
    assert code == 0
    rows = [(r["target"], r["length"], r["verdict"]["status"], r["attribution"])
            for r in report["rows"]]
    assert rows == [("sim:fp32", 0, "pass", ""), ("sim:fp16", 0, "pass", ""),
                    ("sim:ane", 0, "pass", "")]
    assert report["explorations"] == {} and report["discovery"] is None


def test_list_families() -> None:
    done = _cli("run", "--list-families")
    assert done.returncode == 0, done.stderr
    names = [line.split()[0] for line in done.stdout.splitlines()]
    assert names[0] == "const" and {"normal", "special", "masks", "lengths"} <= set(names)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget", "0"], "--budget 0: give at least 1"),
        (["--budget", "many"], "--budget 'many'"),
        (["--convert", "onnx"], "--convert 'onnx': one of export, trace, both"),
        (["--families", "const,nope"], "unknown value family 'nope'"),
        (["--explore", "deep"], "--explore 'deep': one of auto, none"),
        (["--jobs", "0"], "--jobs 0: give at least 1"),
    ],
)
def test_bad_discovery_options_are_one_line_exit_2(lse: Path, args: list[str],
                                                   message: str) -> None:
    done = _cli("run", str(lse), *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1

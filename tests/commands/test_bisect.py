"""``nebisect bisect`` as a user runs it: output directory, JSON, the live line on stderr,
one-line errors."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import REPO
from support.bisect_programs import chain

NEBISECT = [sys.executable, "-m", "nebisect"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NEBISECT, *args], capture_output=True, text=True, cwd=REPO,
                          timeout=900)


@pytest.fixture(scope="module")
def chain40(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return chain(tmp_path_factory.mktemp("chain"), 40)


def test_mlpackage_to_json_summary(chain40: tuple[Path, Path], tmp_path: Path) -> None:
    package, inputs = chain40
    out = tmp_path / "out"
    run = cli("bisect", str(package), "--target", "sim:ane", "--inputs", str(inputs),
              "--out", str(out), "--json")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["kept"] == ["lse"] and summary["evaluations"] == 2
    assert json.loads((out / "summary.json").read_text()) == summary
    assert "40 ops → 1 ops, 2 evaluations" in run.stderr  # the live line, last state


@pytest.mark.parametrize(("args", "message"), [
    (["--stage", "load"], "unknown stage 'load'"),
    (["--target", "sim:npu"], "unknown target 'sim:npu'"),
    (["--max-evals", "0"], "--max-evals 0: give at least 1"),
])
def test_usage_errors_are_one_line_exit_2(chain40: tuple[Path, Path], args: list[str],
                                          message: str, tmp_path: Path) -> None:
    package, _ = chain40
    target = [] if "--target" in args else ["--target", "sim:ane"]
    run = cli("bisect", str(package), *target, *args, "--out", str(tmp_path))
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    assert lines[-1].startswith("nebisect: error: ") and message in lines[-1]
    assert "Traceback" not in run.stderr


def test_a_package_on_a_torch_target_is_refused_before_any_work(
        chain40: tuple[Path, Path], tmp_path: Path) -> None:
    package, _ = chain40
    out = tmp_path / "out"
    run = cli("bisect", str(package), "--target", "torch:cpu", "--out", str(out),
              "--max-evals", "2")
    assert (run.returncode, run.stdout) == (2, ""), run.stdout
    assert run.stderr.splitlines() == [
        f"nebisect: error: --target torch:cpu:fp32 runs torch sources (path/file.py:factory, "
        f"model.pt2, model.pt); {package} is not one"]
    assert not out.exists()


# ------------------------------------------------------------- from a finding to bisect
SEED000 = "examples/logsumexp_ne.py:model"
#: seed 000's model, as fast as it still fails: one target, one conversion path
ONE_PATH = ("-t", "sim:ane", "--convert", "export")


@pytest.fixture(scope="module")
def seed000_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``run`` of seed 000's model that saves its triggers and writes its report."""
    root = tmp_path_factory.mktemp("seed000")
    run = cli("run", SEED000, *ONE_PATH, "--budget", "4", "--lengths", "8",
              "--save-triggers", str(root / "triggers"), "--report", str(root / "report"))
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"    next: nebisect bisect {SEED000} -t sim:ane --convert export --inputs " \
        f"{root}/triggers/1.npz" in run.stdout  # under the group it bisects
    return root


def test_run_saves_the_trigger_of_each_failure_group(seed000_run: Path) -> None:
    directory = seed000_run / "triggers"
    index = json.loads((directory / "triggers.json").read_text())
    assert index["source"].endswith("examples/logsumexp_ne.py:model")
    (trigger,) = index["triggers"]
    assert {k: trigger[k] for k in ("number", "target", "path", "signature", "attribution",
                                    "input_set", "inputs", "stage")} == {
        "number": 1, "target": "sim:ane", "path": "export", "signature": "mismatch:collapse",
        "attribution": "device", "input_set": "const(x=7.625)", "inputs": "1.npz",
        "stage": "predict"}
    assert "reduce_log_sum_exp" in trigger["culprit"]
    with np.load(directory / "1.npz", allow_pickle=False) as saved:
        assert saved["x"].shape == (1, 1, 8, 8) and np.all(saved["x"] == 7.625)
    bisect, corpus = trigger["commands"]
    assert bisect == (f"nebisect bisect {SEED000} -t sim:ane --convert export --inputs "
                      f"{directory}/1.npz --out {directory}/bisect-1")
    assert corpus == (f"nebisect corpus add corpus {SEED000} -t sim:ane --inputs "
                      f"{directory}/1.npz")
    report = seed000_run / "report"
    assert (report / "triggers" / "1.npz").is_file()
    assert "triggers/triggers.json" in (report / "report.json").read_text()


def test_bisect_takes_the_saved_trigger(seed000_run: Path) -> None:
    """The index's bisect command, as printed: no hand-made input."""
    index = json.loads((seed000_run / "triggers" / "triggers.json").read_text())
    command = shlex.split(index["triggers"][0]["commands"][0])
    assert command[:2] == ["nebisect", "bisect"]
    run = cli(*command[1:])
    assert run.returncode == 0, run.stderr
    summary = json.loads((seed000_run / "triggers" / "bisect-1" / "summary.json").read_text())
    assert summary["signature"] == "mismatch:collapse"
    assert "reduce_log_sum_exp" in summary["kept_types"]


def test_bisect_takes_a_finding_of_the_report(seed000_run: Path, tmp_path: Path) -> None:
    report = seed000_run / "report" / "report.json"
    run = cli("bisect", "--finding", f"{report}#1", "--out", str(tmp_path / "out"), "--json")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["source"].endswith("examples/logsumexp_ne.py:model")
    assert (summary["target"], summary["signature"]) == ("sim:ane", "mismatch:collapse")
    assert "reduce_log_sum_exp" in summary["kept_types"]


@pytest.mark.parametrize(("finding", "extra", "message"), [
    ("{report}#2", [], "{report}#2: no finding 2 (the report has 1)"),
    ("{report}", [], "{report}: name the finding as {report}#N"),
    ("{report}#1", ["-t", "sim:fp16"], "--finding names the source, target and inputs; give "
     "no SOURCE, --target or --inputs with it"),
])
def test_finding_errors_are_one_line(seed000_run: Path, finding: str, extra: list[str],
                                     message: str, tmp_path: Path) -> None:
    report = str(seed000_run / "report" / "report.json")
    run = cli("bisect", "--finding", finding.format(report=report), *extra,
              "--out", str(tmp_path / "out"))
    assert run.returncode == 2
    assert run.stderr.strip().splitlines()[-1] == (
        f"nebisect: error: {message.format(report=report)}")


def _hostile_finding(tmp_path: Path, kind: str) -> tuple[str, str]:
    """(the --finding argument, the one-line error it must give) for a hostile file."""
    index = {"schema": "nebisect.triggers", "schema_version": 1, "source": "x.py:model",
             "triggers": []}
    report = tmp_path / "report" / "report.json"
    report.parent.mkdir()
    summary: object = {"triggers": "triggers/triggers.json"}
    if kind == "summary list":
        summary = ["triggers/triggers.json"]
    if kind == "triggers outside":
        summary = {"triggers": "../elsewhere/triggers.json"}
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "elsewhere" / "triggers.json").write_text(json.dumps(index))
    if kind == "triggers with NUL":
        summary = {"triggers": "triggers\u0000.json"}
    report.write_text(json.dumps({"schema": "nebisect.report", "schema_version": 1,
                                  "kind": "run", "summary": summary}))
    (report.parent / "triggers").mkdir()
    nested = report.parent / "triggers" / "triggers.json"
    nested.write_text("[" * 200_000 + "]" * 200_000 if kind == "deep index"
                      else json.dumps(index))
    return {
        "5000 digits": (f"{report}#{'9' * 5000}", f"{report}: name the finding as {report}#N"),
        "superscript": (f"{report}#\u00b2", f"{report}: name the finding as {report}#N"),
        "deep index": (f"{report}#1", f"{nested}: is nested deeper than 32 levels"),
        "summary list": (f"{report}#1",
                         f"{report}: a report without triggers (run --report writes them)"),
        "triggers outside": (f"{report}#1", f"{report}: its summary names triggers outside "
                                            "its directory ('../elsewhere/triggers.json')"),
        "triggers with NUL": (f"{report}#1", f"{report}: its summary names triggers outside "
                                             "its directory ('triggers\\x00.json')"),
    }[kind]


@pytest.mark.parametrize("kind", ["5000 digits", "superscript", "deep index", "summary list",
                                  "triggers outside", "triggers with NUL"])
def test_a_hostile_finding_file_is_one_line_and_exit_2(kind: str, tmp_path: Path) -> None:
    finding, message = _hostile_finding(tmp_path, kind)
    run = cli("bisect", "--finding", finding, "--out", str(tmp_path / "out"))
    assert (run.returncode, run.stderr) == (2, f"nebisect: error: {message}\n")
    assert not (tmp_path / "out").exists()


def test_bisect_without_inputs_explores_for_a_trigger(tmp_path: Path) -> None:
    run = cli("bisect", SEED000, *ONE_PATH, "--out", str(tmp_path / "out"), "--json")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["trigger"].startswith("const(x=7.625) [torch.export], found exploring "
                                         "sim:ane")
    assert "reduce_log_sum_exp" in summary["kept_types"]


def test_nothing_to_bisect_when_exploration_finds_nothing(chain40: tuple[Path, Path],
                                                         tmp_path: Path) -> None:
    package, _ = chain40
    run = cli("bisect", str(package), "-t", "sim:fp64", "--budget", "3",
              "--out", str(tmp_path / "out"))
    assert run.returncode == 2
    line = run.stderr.strip().splitlines()[-1]
    assert line.startswith(f"nebisect: error: {package} does not fail on sim:fp64")
    assert line.endswith("3 explored); nothing to bisect")

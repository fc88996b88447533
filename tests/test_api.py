"""The Python API: nebisect.run on objects of the caller's process and on paths.

The models are defined here, in the test module — as a notebook's are in ``__main__``:
no child can import them, so the API must export them where they live. A crash in
``forward`` must be a verdict while this process lives on.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from support import REPO

import nebisect
from nebisect.errors import NebisectError

EXAMPLE = str(REPO / "examples" / "logsumexp_ne.py") + ":model"
CHANNELS, SPATIAL = 32, 8


class Seed000(torch.nn.Module):
    """Seed 000's conv → logsumexp(dim=1) → linear: the channel logsumexp is x + log 32."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, CHANNELS, 3, padding="same")
        self.fc = torch.nn.Linear(CHANNELS * SPATIAL * SPATIAL, 16)
        assert self.conv.bias is not None and self.fc.bias is not None
        with torch.no_grad():
            self.conv.weight.zero_()
            self.conv.weight[:, 0, 1, 1] = 1.0
            torch.nn.init.zeros_(self.conv.bias)
            self.fc.weight.zero_()
            self.fc.weight.fill_diagonal_(1.0)
            torch.nn.init.zeros_(self.fc.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.conv(x)
        return self.fc(torch.logsumexp(c, dim=1, keepdim=True).expand_as(c).flatten(1))


class NullDereference(torch.nn.Module):
    """``forward`` dereferences NULL, as a crashing C extension does."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ctypes.string_at(0)
        return x + 1


SEED_INPUT = (torch.full((1, 1, SPATIAL, SPATIAL), 2.5),)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nebisect", *args], capture_output=True,
                          text=True, timeout=900, cwd=REPO)


def _brackets(report: Any, target: str = "sim:ane") -> set[tuple[float, float]]:
    exploration = report.explorations[target]
    return {(c.cliff.lo, c.cliff.hi) for c in exploration.cliffs if c.family == "const"}


def _comparable(document: dict[str, Any]) -> Any:
    """The JSON of a run without what differs between two runs of one source: wall
    times, process facts, the temporary paths of inputs files and packages."""
    varying = {"timings", "seconds", "elapsed", "process", "wall", "time", "timing", "path",
               "inputs", "package", "npz"}

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in varying}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return strip(document)


def _finding_identities(document: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(f["title"], f["symptom"], f["op_type"]) for f in document["findings"]]


@pytest.mark.slow
def test_a_module_of_this_process_shows_seed_000s_collapse_at_the_fp16_bracket() -> None:
    result = nebisect.run(Seed000(), example_inputs=SEED_INPUT, progress=False)
    assert not result.ok
    assert (7.62109375, 7.625) in _brackets(result.report)
    first = result.findings[0]
    assert first.representative.culprit is not None
    assert "reduce_log_sum_exp" in first.title and "collapses" in first.title
    assert {r.path for r in result.report.rows} == {"export", "trace"}
    assert "7.62109375" in result._repr_html_()
    assert "collapses" in repr(result)


def test_a_forward_that_dereferences_null_is_a_crash_verdict_and_this_process_lives() -> None:
    pid = os.getpid()
    result = nebisect.run(NullDereference(), example_inputs=(torch.ones(1, 4),), progress=False)
    assert os.getpid() == pid
    assert not result.ok
    signatures = {(r.path, r.verdict.signature) for r in result.report.rows}
    assert signatures == {("export", "crash:SIGSEGV"), ("trace", "crash:SIGSEGV")}
    assert [f.representative.signature for f in result.findings] == ["crash:SIGSEGV"]
    # the caller is whole: the next run in it works
    again = nebisect.run(Seed000(), example_inputs=SEED_INPUT, explore="none", progress=False,
                         lengths=[1])
    assert again.ok


@pytest.mark.slow
def test_a_saved_exported_program_runs_from_the_cli_with_the_module_s_findings(
        tmp_path: Path) -> None:
    program = torch.export.export(Seed000().eval(), SEED_INPUT)
    saved = tmp_path / "seed000.pt2"
    torch.export.save(program, str(saved))
    cli = _cli("run", str(saved), "--json")
    assert cli.returncode == 1, cli.stderr
    from_cli = json.loads(cli.stdout)
    # the program itself from the API: the same findings, title for title
    from_program = json.loads(nebisect.run(program, progress=False).to_json())
    assert _finding_identities(from_cli) == _finding_identities(from_program)
    # an ExportedProgram converts on the torch.export path; the module it came from
    # shows the same root cause, there and on jit.trace
    from_module = json.loads(nebisect.run(Seed000(), example_inputs=SEED_INPUT,
                                          progress=False).to_json())
    assert {r["path"] for r in from_cli["rows"]} == {"export"}
    assert ([(f["symptom"], f["op_type"]) for f in from_cli["findings"]]
            == [(f["symptom"], f["op_type"]) for f in from_module["findings"]]
            == [("collapse", "reduce_log_sum_exp")])
    assert (7.62109375, 7.625) in {
        (c["cliff"]["lo"], c["cliff"]["hi"])
        for c in from_cli["explorations"]["sim:ane"]["cliffs"] if c["family"] == "const"}


def test_the_api_and_the_cli_give_equal_json_for_one_source() -> None:
    args = {"lengths": "1", "explore": "none", "target": ["sim:fp32", "sim:ane"]}
    cli = _cli("run", EXAMPLE, "--lengths", "1", "--explore", "none", "-t", "sim:fp32",
               "-t", "sim:ane", "--json")
    assert cli.returncode == 0, cli.stderr
    api = nebisect.run(EXAMPLE, progress=False, **args)
    assert api.ok
    from_cli, from_api = json.loads(cli.stdout), json.loads(api.to_json())
    assert _comparable(from_cli) == _comparable(from_api)
    assert [r["verdict"]["signature"] for r in from_api["rows"]] == ["pass"] * 6


@pytest.mark.parametrize("kwargs, option", [
    ({"lengths": [0]}, ["--lengths", "0"]),
    ({"convert": "sideways"}, ["--convert", "sideways"]),
    ({"explore": "maybe"}, ["--explore", "maybe"]),
    ({"require": ["tpu"]}, ["--require", "tpu"]),
    ({"budget": "lots"}, ["--budget", "lots"]),
])
def test_a_bad_argument_raises_the_cli_s_one_line_message(kwargs: dict[str, Any],
                                                          option: list[str]) -> None:
    with pytest.raises(NebisectError) as raised:
        nebisect.run(EXAMPLE, progress=False, **kwargs)
    cli = _cli("run", EXAMPLE, *option)
    assert cli.returncode == 2
    assert cli.stderr.strip() == f"nebisect: error: {raised.value}"


def test_a_missing_source_and_a_module_without_inputs_are_nebisect_errors(
        tmp_path: Path) -> None:
    with pytest.raises(NebisectError, match="no such file"):
        nebisect.run(str(tmp_path / "absent.pt2"), progress=False)
    with pytest.raises(NebisectError, match="give example_inputs"):
        nebisect.run(Seed000(), progress=False)
    with pytest.raises(NebisectError, match="not a source"):
        nebisect.run(object(), progress=False)
    with pytest.raises(NebisectError, match="must be forward"):
        nebisect.run(Seed000(), example_inputs={"y": SEED_INPUT[0]}, progress=False)


def test_torchscript_keeps_its_example_inputs_when_saved_by_nebisect(tmp_path: Path) -> None:
    traced = torch.jit.trace(Seed000().eval(), SEED_INPUT)
    bare = tmp_path / "bare.pt"
    torch.jit.save(traced, str(bare))
    cli = _cli("run", str(bare))
    assert cli.returncode == 2
    assert "TorchScript keeps no example inputs" in cli.stderr
    saved = nebisect.save_torchscript(traced, SEED_INPUT, tmp_path / "seed.pt")
    result = nebisect.run(str(saved), explore="none", lengths=[1], progress=False,
                          inputs=_npz(tmp_path, 7.7))
    assert {r.path for r in result.report.rows} == {"trace"}
    assert [(r.target, r.verdict.signature) for r in result.report.rows
            if r.verdict.failed] == [("sim:ane", "mismatch:collapse")]


def _npz(directory: Path, value: float) -> Path:
    path = directory / "x.npz"
    np.savez(path, x=np.full((1, 1, SPATIAL, SPATIAL), value, np.float32))
    return path


def test_lint_from_the_api_is_the_cli_s_json_and_takes_a_module() -> None:
    cli = _cli("lint", EXAMPLE, "--format", "json", "--input-range", "x=0:10")
    report = nebisect.lint(EXAMPLE, input_range=["x=0:10"])
    assert cli.returncode == (0 if report.ok else 1)
    assert json.loads(cli.stdout) == json.loads(report.to_json())
    rules = {f.rule_id for f in report.findings}
    assert rules, "seed 000's logsumexp over 0..10 is a hazard lint knows"
    from_module = nebisect.lint(Seed000(), example_inputs=SEED_INPUT, input_range=["x=0:10"])
    assert {f.rule_id for f in from_module.findings} == rules
    assert "nebisect-report" in from_module._repr_html_()


def test_replay_from_the_api_is_the_cli_s_json(tmp_path: Path) -> None:
    cli = _cli("replay", "corpus", "--target", "sim:fp16", "--json")
    report = nebisect.replay(REPO / "corpus", target="sim:fp16", progress=False)
    assert cli.returncode == (0 if report.ok else 1) == 0
    from_cli, from_api = json.loads(cli.stdout), json.loads(report.to_json())
    assert _comparable(from_cli) == _comparable(from_api)
    assert sum(r["outcome"] == "ok" for r in from_api["results"]) >= 4
    empty = nebisect.replay(tmp_path, progress=False)
    assert not empty.ok and empty.empty
    assert nebisect.replay(tmp_path, allow_empty=True, progress=False).ok


@pytest.mark.slow
def test_bisect_reduces_a_module_of_this_process_to_the_logsumexp(tmp_path: Path) -> None:
    out = tmp_path / "out"
    report = nebisect.bisect(Seed000(), example_inputs=SEED_INPUT, target="sim:ane",
                             inputs=_npz(tmp_path, 7.7), out=out, progress=False)
    assert report.ok
    assert report.result.kept_types == ["reduce_log_sum_exp"]
    assert report.repro is not None and report.repro.parent == out
    assert json.loads(report.to_json())["reduced_signature"] == "mismatch:collapse"


def test_fuzz_an_op_from_the_api_finds_the_logsumexp_collapse() -> None:
    report = nebisect.fuzz(op="reduce_log_sum_exp", target="sim:ane", budget=40, seed=0,
                           progress=False)
    assert not report.ok
    assert {f.signature for f in report.findings} >= {"mismatch:collapse"}
    document = json.loads(report.to_json())
    assert [r["subject"] for r in document["results"]] == ["reduce_log_sum_exp"]
    with pytest.raises(NebisectError, match="not both"):
        nebisect.fuzz(EXAMPLE, op="reduce_log_sum_exp", progress=False)


def test_fix_from_the_api_rewrites_a_module_s_logsumexp(tmp_path: Path) -> None:
    fixed = tmp_path / "fixed.mlpackage"
    report = nebisect.fix(Seed000(), ["logsumexp-max-shift"], example_inputs=SEED_INPUT,
                          output=fixed)
    assert report.ok and report.applied == {"logsumexp-max-shift": "1 rewrite(s)"}
    after = nebisect.run(str(fixed), inputs=_npz(tmp_path, 7.7), explore="none",
                         progress=False)
    assert after.ok, [r.verdict.signature for r in after.report.rows]

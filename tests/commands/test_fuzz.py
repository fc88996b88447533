"""``nebisect fuzz`` as a user runs it: listing, JSON, corpus and report outputs, errors."""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

NEBISECT = [sys.executable, "-m", "nebisect"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NEBISECT, "fuzz", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=900)


def test_list_ops() -> None:
    done = cli("--list-ops", "--json")
    assert done.returncode == 0, done.stderr
    ops = {row["op"]: row for row in json.loads(done.stdout)}
    assert len(ops) >= 40 and ops["reduce_log_sum_exp"]["family"] == "reduce"
    assert "softplus" in cli("--list-ops").stdout


@pytest.mark.parametrize(("args", "message"), [
    (["--op", "reduce_logsumexp"], "unknown op 'reduce_logsumexp' (did you mean"),
    ([], "give a SOURCE (an .mlpackage or path/to/file.py:factory) or --op OP"),
    (["--op", "softplus", "--wrap", "gpu"], "unknown --wrap 'gpu'"),
    (["--op", "softplus", "--target", "sim:fp8"], "unknown target 'sim:fp8'"),
    (["--op", "softplus", "--budget", "0"], "--budget 0: give at least 1"),
    (["--op", "softplus", "--corpus", "/proc/no/corpus"],
     "/proc/no/corpus: cannot create the corpus directory"),
    (["--op", "softplus", "--report", "/proc/no/report"], "--report /proc/no/report: cannot"),
])
def test_bad_arguments_are_one_line_exit_2(args: list[str], message: str) -> None:
    done = cli(*args)
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    # Checked before any case runs: no progress bar, nothing fuzzed.
    assert "cases/s" not in done.stderr and len(done.stderr.splitlines()) == 1
    assert len(done.stderr.strip().splitlines()) == 1


def test_no_findings_exit_0() -> None:
    done = cli("--op", "softplus", "--target", "sim:fp32", "--budget", "5")
    assert done.returncode == 0, done.stderr
    assert "No findings on sim:fp32 (seed 0)." in done.stderr + done.stdout


def test_json_corpus_and_report(tmp_path: Path) -> None:
    done = cli("--op", "softplus", "--target", "sim:ane", "--seed", "0", "--budget", "10",
               "--json", "--corpus", str(tmp_path / "corpus"), "--report", str(tmp_path / "r"))
    assert done.returncode == 1, done.stderr  # findings: a failure was found
    body = json.loads(done.stdout)
    [result] = body["results"]
    [finding] = [f for f in result["findings"] if f["signature"] == "mismatch:collapse"]
    assert (finding["cliff"]["lo"], finding["cliff"]["hi"]) == (10.390625, 10.3984375)
    assert finding["cliff"]["predicted"]["value"] == pytest.approx(math.log(2**15))
    case_dir = Path(finding["case_dir"])
    assert case_dir.parent == tmp_path / "corpus" and (case_dir / "case.json").is_file()
    assert (tmp_path / "r" / "report.json").is_file() and (tmp_path / "r" / "report.html").is_file()
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["kind"] == "fuzz"


@pytest.mark.slow
def test_main_job_logsumexp_on_the_default_simulated_target() -> None:
    done = cli("--op", "reduce_log_sum_exp", "--target", "sim:ane", "--seed", "0",
               "--budget", "200", "--json")
    assert done.returncode == 1, done.stderr
    [result] = json.loads(done.stdout)["results"]
    assert 190 <= result["generated"] <= 200  # distinct cases; duplicates are not re-run
    collapses = [f for f in result["findings"] if f["signature"] == "mismatch:collapse"]
    assert collapses
    for finding in collapses:
        cliff = finding["cliff"]
        assert cliff["ulps"] == 1 and cliff["predictions"] <= 20
        assert cliff["predicted"]["label"].startswith("log(65504/") and cliff["distance"] < 0.01


@pytest.mark.parametrize("width", [80, 120, 200])
def test_findings_table_never_breaks_a_cell(width: int) -> None:
    from rich.console import Console

    from nebisect.fuzzing.reporting import COLUMNS
    from nebisect.report.tables import Column, fitted_table

    row = ["reduce_log_sum_exp", "mismatch:collapse", "axes=1/no_keep_dims",
           "x[1, 32, 1, 1]: delta 8", "7.62109375 | 7.625", "log(65504/32) = 7.6241", "17"]
    console = Console(width=width, record=True)
    table, dropped = fitted_table("Findings", [Column(h) for h in COLUMNS], [row], width,
                                  blocks=True)
    assert dropped == []
    console.print(table)
    text = console.export_text()
    for cell in row:
        assert cell in text
    one_row_per_finding = any(all(h in line for h in COLUMNS) for line in text.splitlines())
    assert one_row_per_finding == (width >= 160)


#: wide enough that no printed line wraps
WIDE = {**os.environ, "COLUMNS": "400"}


def readme_command(pattern: str) -> list[str]:
    """The README's ``.venv/bin/nebisect …`` command line matching ``pattern``, as
    arguments after ``nebisect``."""
    lines = [line.strip() for line in (REPO / "README.md").read_text().splitlines()]
    [line] = [line for line in lines if line.startswith(".venv/bin/nebisect ") and
              re.search(pattern, line)]
    return shlex.split(line.split("#")[0])[1:]


def readme_run(pattern: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NEBISECT, *readme_command(pattern)], capture_output=True,
                          text=True, cwd=REPO, timeout=900, env=WIDE)


@pytest.mark.slow
def test_readme_op_command_prints_one_finding_with_a_bracket_per_reduction_size() -> None:
    # Before: "— 8 finding(s)", one table row per parameter class, the law never stated.
    done = readme_run(r"fuzz --op reduce_log_sum_exp ")
    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert re.search(r"reduce_log_sum_exp: .* — 1 finding \(\d+ failing cases\)", out), out
    [finding] = [line for line in out.splitlines() if line.startswith("✗")]
    assert finding.startswith("✗ reduce_log_sum_exp: mismatch:collapse in ")
    assert "theory log(65504/n): Σexp(x) over n equal values" in finding
    cliffs = [line.strip() for line in out.splitlines() if line.strip().startswith("cliff: x")]
    brackets = set(re.findall(r"^\s*cliff: x (\S+ \| \S+)", out, re.MULTILINE))
    # the brackets the README lists, each beside its own boundary
    assert {"9.296875 | 9.3046875", "11.0859375 | 11.09375", "9.984375 | 9.9921875"} <= brackets
    assert any(line.endswith("theory log(65504/6) = 9.29811") for line in cliffs)


@pytest.mark.slow
def test_readme_model_command_pins_the_32_channel_cliff() -> None:
    # Before: the README credited this pair to `fuzz --op reduce_log_sum_exp`, whose
    # cases reduce over 1, 3 and 6 elements: the pair appeared nowhere in its output.
    done = readme_run(r"fuzz examples/logsumexp_ne\.py:model")
    assert done.returncode == 1, done.stderr
    lines = [line.strip() for line in done.stdout.splitlines()]
    assert any(line.startswith("sim:ane [torch.export]: cliff in const: x 7.62109375 | 7.625 "
                               "(output ") and
               line.endswith("theory log(65504/32) = 7.62413") for line in lines), done.stdout
    assert len([line for line in lines if line.startswith("✗")]) == 1

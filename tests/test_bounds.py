"""Every command's numeric options are checked at once against their kind's bounds:
seconds (positive, at most a day), seeds (0 .. 2**32-1), counts (at least 1; jobs at
most 1024), memory sizes (64M .. 1024T, with a unit). A value out of bounds is one line
and exit 2, before any work — never an OverflowError or ValueError traceback with exit 1
from deep inside a run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from support.corpus_helpers import shipped_package

from nebisect.cli import main
from nebisect.errors import NebisectError

MAX_SEED, MAX_JOBS = 2**32 - 1, 1024
PACKAGE = str(shipped_package("log-softmax-fp16-underflow"))
TOO_LONG = "seconds must be a positive number, at most 86400 (one day)"
SEED = f"give a seed from 0 to {MAX_SEED}"
SIZE = "give a size such as 4G or 512M"
MEMORY_RANGE = "give a size from 64M to 1024T"

CASES = [
    (["run", PACKAGE, "--timeout", "2200000"], f"--timeout '2200000': {TOO_LONG}"),
    (["run", PACKAGE, "--timeout", "predict=1e10"], f"--timeout 'predict=1e10': {TOO_LONG}"),
    (["run", PACKAGE, "--timeout", "1e308"], f"--timeout '1e308': {TOO_LONG}"),
    (["run", PACKAGE, "--seed", "-1"], f"--seed -1: {SEED}"),
    (["run", PACKAGE, "--seed", str(2**32)], f"--seed {2**32}: {SEED}"),
    (["run", PACKAGE, "--budget", "0"], "--budget 0: give at least 1"),
    (["run", PACKAGE, "--jobs", "100000"], f"--jobs 100000: give at most {MAX_JOBS}"),
    (["run", PACKAGE, "--lengths", "8,0"], "--lengths 0: give at least 1"),
    (["fuzz", PACKAGE, "-n", "1", "--seed", "-1"], f"--seed -1: {SEED}"),
    (["fuzz", "--op", "softplus", "-n", "1", "--seed", "-1"], f"--seed -1: {SEED}"),
    (["fuzz", "--op", "softplus", "-n", "1", "--shrink-budget", "-1"],
     "--shrink-budget -1: give at least 0"),
    (["fuzz", "--op", "softplus", "-n", "1", "--jobs", "5000"],
     f"--jobs 5000: give at most {MAX_JOBS}"),
    (["fuzz", "--op", "softplus", "-n", "1", "--timeout", "1e10"],
     f"--timeout '1e10': {TOO_LONG}"),
    (["bisect", PACKAGE, "-t", "sim:ane", "--timeout", "1e308"], f"--timeout 1e+308: {TOO_LONG}"),
    (["bisect", PACKAGE, "-t", "sim:ane", "--timeout", "nan"], f"--timeout nan: {TOO_LONG}"),
    (["bisect", PACKAGE, "-t", "sim:ane", "--case-timeout", "2200000"],
     f"--case-timeout '2200000': {TOO_LONG}"),
    (["bisect", PACKAGE, "-t", "sim:ane", "--length", "0"], "--length 0: give at least 1"),
    (["bisect", PACKAGE, "-t", "sim:ane", "--max-evals", "0"], "--max-evals 0: give at least 1"),
    (["replay", "{corpus}", "--timeout", "2200000"], f"--timeout '2200000': {TOO_LONG}"),
    (["replay", "{corpus}", "--jobs", "0"], "--jobs 0: give at least 1"),
    (["fix", "verify", "{corpus}", "--jobs", "100000"], f"--jobs 100000: give at most {MAX_JOBS}"),
    (["fix", "apply", "softplus-stable", PACKAGE, "-o", "{out}", "--timeout", "1e10"],
     f"--timeout '1e10': {TOO_LONG}"),
    (["corpus", "add", "{corpus}", PACKAGE, "-t", "sim:fp16", "--inputs", "x.npz", "--timeout",
      "1e10"], f"--timeout '1e10': {TOO_LONG}"),
    (["lint", PACKAGE, "--timeout", "1e10"], f"--timeout '1e10': {TOO_LONG}"),
    (["run", PACKAGE, "--memory", "lots"], f"--memory 'lots': {SIZE}"),
    (["run", PACKAGE, "--memory", "1K"], f"--memory 1K: {MEMORY_RANGE}"),
    (["fuzz", "--op", "softplus", "-n", "1", "--memory", "0M"], f"--memory 0M: {MEMORY_RANGE}"),
    (["fuzz", PACKAGE, "-n", "1", "--memory", "2000T"], f"--memory 2000T: {MEMORY_RANGE}"),
    (["bisect", PACKAGE, "-t", "sim:ane", "--memory", "4096"], f"--memory '4096': {SIZE}"),
    (["lint", PACKAGE, "--memory", "63M"], f"--memory 63M: {MEMORY_RANGE}"),
    (["replay", "{corpus}", "--memory", "-1G"], f"--memory '-1G': {SIZE}"),
    (["fix", "verify", "{corpus}", "--memory", "1K"], f"--memory 1K: {MEMORY_RANGE}"),
    (["fix", "apply", "softplus-stable", PACKAGE, "-o", "{out}", "--memory", "1K"],
     f"--memory 1K: {MEMORY_RANGE}"),
    (["corpus", "add", "{corpus}", PACKAGE, "-t", "sim:fp16", "--inputs", "x.npz", "--memory",
      "1K"], f"--memory 1K: {MEMORY_RANGE}"),
]


@pytest.mark.parametrize(("args", "message"), CASES, ids=lambda v: " ".join(v)[:60]
                         if isinstance(v, list) else "")
def test_an_option_out_of_bounds_is_one_line_and_exit_2(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    argv = [a.format(corpus=corpus, out=tmp_path / "out.mlpackage") for a in args]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["nebisect", *argv])
    with pytest.raises(SystemExit) as exit_info:
        main()
    captured = capsys.readouterr()
    assert exit_info.value.code == 2, captured.err
    assert captured.err.splitlines()[-1] == f"nebisect: error: {message}"
    assert "Traceback" not in captured.err and captured.out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]


def test_each_kind_of_value_has_one_check() -> None:
    from nebisect.bounds import check_count, check_memory, check_seconds, check_seed

    assert check_seconds("--timeout 60", 60.0) == 60.0
    assert check_seconds("--timeout 86400", 86400.0) == 86400.0
    assert check_seed("--seed 0", 0) == 0 and check_seed("--seed max", MAX_SEED) == MAX_SEED
    assert check_count("--budget 1", 1) == 1
    assert check_memory("--memory 64M", 64 << 20) == 64 << 20
    for check, value in ((check_seconds, 0.0), (check_seconds, float("inf")),
                         (check_seed, -1), (check_count, 0), (check_count, 10**10),
                         (check_memory, (64 << 20) - 1), (check_memory, 2**60)):
        with pytest.raises(NebisectError):
            check("--option", value)  # type: ignore[operator]

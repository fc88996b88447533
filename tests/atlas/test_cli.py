"""``nebisect atlas`` end to end: bad arguments, and a broken converter found and kept."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import TESTS
from support.leftovers import Sandbox

NEBISECT = [sys.executable, "-m", "nebisect", "atlas"]


def _atlas(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(TESTS), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    return subprocess.run([*NEBISECT, *args], capture_output=True, text=True, env=env,
                          timeout=900, check=False)


#: a sweep of one sample, as quick as a sweep gets (what an unrefused option would start)
ONE_SAMPLE = ("--ops", "tanh", "--dtypes", "float32", "--budget", "1", "--no-cache")


@pytest.mark.parametrize(("args", "message"), [
    (["--ops", "tahn"], "nebisect: error: --ops: 'tahn' not in torch's op database (did you "
                        "mean tan, tanh"),
    (["--ops", ","], "nebisect: error: --ops '': name at least one op"),
    (["--ops", "tanh", "--all"], "nebisect: error: --ops and --all: choose one"),
    (["--dtypes", "float99"], "nebisect: error: --dtypes 'float99'"),
    (["--converter-setup", "nocolon"], "nebisect: error: --converter-setup 'nocolon' must"),
    (["--corpus", "c", "--converter-overrides"], "nebisect: error: --corpus converts plainly"),
    ([*ONE_SAMPLE, "--seed", "-1"], "nebisect: error: --seed -1: give a seed from 0 to "),
    ([*ONE_SAMPLE, "--converter-setup", "support.one_path_overide:install"],
     "nebisect: error: --converter-setup support.one_path_overide:install: "
     "ModuleNotFoundError: No module named 'support.one_path_overide'\n"),
    ([*ONE_SAMPLE, "--converter-setup", "support.one_path_override:instal"],
     "nebisect: error: --converter-setup support.one_path_override:instal: "
     "AttributeError: module 'support.one_path_override' has no attribute 'instal'\n"),
])
def test_bad_arguments_are_one_line_and_exit_2(args: list[str], message: str,
                                                tmp_path: Path) -> None:
    done = _atlas(*args, tmp_path=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(message), done.stderr
    assert done.stderr.count("\n") == 1 and done.stdout == ""


@pytest.mark.slow
def test_a_converter_broken_on_one_path_is_found_kept_and_cached(tmp_path: Path) -> None:
    """support.one_path_override lowers tanh to sigmoid under jit.trace only."""
    keep = tmp_path / "found"
    args = ("--ops", "tanh", "--dtypes", "float32", "--json", "--budget", "1",
            "--converter-setup", "support.one_path_override:install", "--keep", str(keep))
    done = _atlas(*args, tmp_path=tmp_path)
    assert done.returncode == 1, done.stderr
    atlas = json.loads(done.stdout)
    (entry,) = atlas["entries"]
    assert entry["call"] == "torch.tanh(x0)"
    assert entry["cells"]["export"] == {"converts": "ok", "fp64": "pass", "fp32": "pass",
                                        "fp16": "pass", "ane": "pass"}
    assert entry["cells"]["trace"]["fp64"] == "mismatch:tolerance"
    (finding,) = entry["findings"]
    assert (finding["attribution"], finding["op_type"], finding["paths"]) == (
        "conversion", "sigmoid", ["trace"])
    kept = keep / "tanh-float32-0-shrunk"  # shrunk: any shape shows it
    model = (kept / "model.py").read_text()
    assert model.count("torch.tanh(x0)") == 2  # docstring + forward
    assert "'x0': torch.tensor([" in model and model.count(",") < 12  # one element left
    assert "kept tanh fp64: mismatch:tolerance [trace] as float32:0:shrunk (1×1)" in done.stderr
    (trigger,) = json.loads((kept / "triggers.json").read_text())["triggers"]
    assert (trigger["path"], trigger["attribution"]) == ("trace", "conversion")
    assert (kept / trigger["inputs"]).is_file()
    assert any("corpus add" in command for command in trigger["commands"])
    assert "[1/1] tanh float32:0" in done.stderr

    again = _atlas(*args[:-2], tmp_path=tmp_path)  # no --keep: nothing is judged again
    assert again.returncode == 1
    assert json.loads(again.stdout)["computed"] == 0  # read from the cache
    assert "(cached," in again.stderr


@pytest.mark.slow
def test_samples_judged_side_by_side_give_the_atlas_judged_one_by_one(tmp_path: Path) -> None:
    def entries(jobs: str) -> list[dict[str, object]]:
        done = _atlas("--ops", "reciprocal,exp,tanh,sigmoid", "--dtypes", "float32",
                      "--budget", "1", "--no-cache", "--json", "--jobs", jobs,
                      tmp_path=tmp_path)
        assert done.returncode == 1, done.stderr  # reciprocal's epsilon (PR #2773)
        return [{k: v for k, v in e.items() if k != "seconds"}
                for e in json.loads(done.stdout)["entries"]]

    one_by_one = entries("1")
    assert len(one_by_one) > 2 and any(e["findings"] for e in one_by_one)
    assert entries("2") == one_by_one  # the same entries, in sample order


def test_the_op_database_leaves_no_torch_cache_in_tmpdir(tmp_path: Path) -> None:
    """The command's own process imports torch (the op database): torch's compile cache
    goes to a temp dir of the command's, removed at its end."""
    sandbox = Sandbox(tmp_path / "sandbox")
    done = sandbox.run("atlas", "--list-ops")
    assert done.returncode == 0, done.stderr
    assert "tanh" in done.stdout.split()
    assert sandbox.leftovers() == []


def test_a_saved_atlas_that_is_not_one_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"schema": "nebisect.atlas", "schema_version": 99}')
    (tmp_path / "text.json").write_text("not json")
    for name in ("bad.json", "text.json", "missing.json"):
        done = _atlas("--load", str(tmp_path / name), tmp_path=tmp_path)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith(f"nebisect: error: --load {tmp_path / name}: ")
        assert done.stderr.count("\n") == 1


@pytest.mark.slow
def test_a_published_converter_bug_is_stored_as_a_corpus_case_replay_guards(
        tmp_path: Path) -> None:
    """coremltools PR #2773: torch.reciprocal converts to inverse with epsilon 1e-4."""
    corpus = tmp_path / "corpus"
    done = _atlas("--ops", "reciprocal", "--dtypes", "float32", "--corpus", str(corpus),
                  "--json", "--no-cache", "--budget", "1", tmp_path=tmp_path)
    assert done.returncode == 1, done.stderr
    (entry,) = json.loads(done.stdout)["entries"]
    assert [f["op_type"] for f in entry["findings"]] == ["inverse"]
    cases = sorted(corpus.glob("*/case.json"))
    assert len(cases) == 1
    record = json.loads(cases[0].read_text())
    assert record["expected"]["status"] == "failing"
    assert record["expected"]["signature"] == "mismatch:tolerance"
    replayed = subprocess.run([sys.executable, "-m", "nebisect", "replay", str(corpus)],
                              capture_output=True, text=True, timeout=900, check=False,
                              env={**os.environ, "PYTHONPATH": str(TESTS)})
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "1 ok" in replayed.stdout + replayed.stderr

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

from nebisect.patterns.program import campaign

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
    (["--ops", "tanh", "--all"], "nebisect: error: --ops, --all and --patterns: choose one"),
    (["--ops", "tanh", "--patterns", "2"],
     "nebisect: error: --ops, --all and --patterns: choose one"),
    (["--patterns", "0"], "nebisect: error: --patterns: give at least 1"),
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
    entry, moved = atlas["entries"]  # OpInfo's sample, and it with -inf at every other
    assert entry["call"] == moved["call"] == "torch.tanh(x0)"
    assert (entry["index"], moved["index"]) == ("float32:0", "float32:0:neg-inf")
    # sigmoid(-inf) is 0 where tanh(-inf) is -1: a failure of its own
    assert moved["cells"]["trace"]["fp64"] == "mismatch:collapse"
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
    issue = (kept / "issue.md").read_text()
    assert issue.startswith("# nebisect run model.py:model: 1 finding")
    assert "sigmoid" in issue and "jit.trace" in issue
    assert issue.count("```python") == 1 and "torch.tanh(x0)" in issue  # the repro
    assert "[1/2] tanh float32:0" in done.stderr

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


def test_a_sweep_leaves_no_torch_cache_in_tmpdir(tmp_path: Path) -> None:
    """The command's own process imports torch (the op database, a sample's module):
    torch's compile cache goes to a temp dir of the command's, removed at its end
    (a one-sample sweep left ``$TMPDIR/torchinductor_$USER`` on 13f2717)."""
    sandbox = Sandbox(tmp_path / "sandbox")
    done = sandbox.run("atlas", *ONE_SAMPLE, "--json",
                       XDG_CACHE_HOME=str(tmp_path / "cache"))
    assert done.returncode == 0, done.stderr
    assert [entry["op"] for entry in json.loads(done.stdout)["entries"]] == ["tanh", "tanh"]
    assert sandbox.leftovers() == []


def test_a_pattern_sweep_judges_the_campaigns_programs_on_both_paths(tmp_path: Path) -> None:
    """Program 0 of campaign 0 (integer arithmetic with Python ints, in int32) converts
    and computes as torch does on both paths."""
    done = _atlas("--patterns", "1", "--budget", "1", "--no-cache", "--json",
                  tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    saved = json.loads(done.stdout)
    assert saved["settings"]["samples"] == "patterns"
    (entry,) = saved["entries"]
    (program,) = campaign(1, 0)
    assert (entry["op"], entry["index"], entry["digest"]) == (
        program.op_name, "0:0", program.digest())
    assert {path: row["converts"] for path, row in entry["cells"].items()} == {
        "export": "ok", "trace": "ok"}


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
    entry, _ = json.loads(done.stdout)["entries"]  # and it with -inf at every other element
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


def _atlas_quick(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """An atlas command that must end at once (a minute at most: a FIFO read would hang)."""
    env = {**os.environ, "PYTHONPATH": str(TESTS), "XDG_CACHE_HOME": str(tmp_path / "cache"),
           "COLUMNS": "400"}
    return subprocess.run([*NEBISECT, *args], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


@pytest.mark.parametrize(("option", "kind", "reason"), [
    ("--load", "fifo", "is not a regular file but a FIFO"),
    ("--diff", "fifo", "is not a regular file but a FIFO"),
    ("--load", "device", "is not a regular file but a character device"),
    ("--load", "deep", "is nested deeper than 32 levels"),
    ("--diff", "deep", "is nested deeper than 32 levels"),
    ("--load", "number", "holds a number longer than 40 characters"),
])
def test_a_saved_atlas_is_read_bounded(option: str, kind: str, reason: str,
                                       tmp_path: Path) -> None:
    """A FIFO does not hang, /dev/zero is not read until memory runs out, deep nesting is
    no RecursionError, a 5 000-digit number no int() overflow: each one line, exit 2."""
    saved = tmp_path / "atlas.json"
    if kind == "fifo":
        os.mkfifo(saved)
    elif kind == "device":
        saved = Path("/dev/zero")
    elif kind == "deep":
        saved.write_text("[" * 200_000 + "]" * 200_000)
    else:
        saved.write_text('{"schema": "nebisect.atlas", "computed": ' + "9" * 5000 + "}")
    load = ["--load", str(tmp_path / "other.json")] if option == "--diff" else []
    done = _atlas_quick(option, str(saved), *load, tmp_path=tmp_path)
    assert (done.returncode, done.stderr) == (2, f"nebisect: error: {option} {saved}: {reason}\n")


def test_a_cache_path_that_is_a_file_fails_before_the_sweep(tmp_path: Path) -> None:
    cache = tmp_path / "cache-file"
    cache.write_text("not a directory")
    done = _atlas("--ops", "tanh", "--dtypes", "float32", "--budget", "1", "--cache", str(cache),
                  tmp_path=tmp_path)
    assert (done.returncode, done.stderr) == (
        2, f"nebisect: error: --cache {cache}: exists and is not a directory\n")


#: a name that clears the screen, retitles the window, is Rich markup and HTML
HOSTILE = "evil\x1b[2J\x1b]0;pwned\x07[red]x[/red]<img src=x onerror=alert(1)>"


def _hostile_atlas(path: Path, fp64: str = "mismatch:tolerance") -> Path:
    from nebisect.atlas.records import Atlas, AtlasEntry, AtlasFinding

    row = {"converts": "ok", "fp64": fp64, "fp32": "pass", "fp16": "pass", "ane": "pass"}
    entry = AtlasEntry(HOSTILE, f"float32:0{HOSTILE}", f"torch.{HOSTILE}(x0)", "d",
                       {"trace": row}, [AtlasFinding(HOSTILE, "tolerance", "conversion",
                                                     HOSTILE, ["trace"], [], HOSTILE)])
    path.write_text(json.dumps(Atlas({"coremltools": HOSTILE}, {}, [entry]).to_dict()))
    return path


def test_names_from_a_saved_atlas_drive_neither_the_terminal_nor_the_markdown(
        tmp_path: Path) -> None:
    saved = _hostile_atlas(tmp_path / "shared.json")
    before = _hostile_atlas(tmp_path / "before.json", fp64="pass")
    markdown = tmp_path / "atlas.md"
    done = _atlas_quick("--load", str(saved), "--diff", str(before), "--markdown",
                        str(markdown), tmp_path=tmp_path)
    assert done.returncode == 1, done.stderr  # fp64 regressed
    for output in (done.stdout, done.stderr):
        assert "\x1b" not in output and "\x07" not in output
    assert "evil\\x1b[2J\\x1b]0;pwned\\x07[red]x[/red]<img" in done.stdout  # literal text
    assert "\n  evil\\x1b[2J\\x1b]0;pwned" in done.stderr  # its row in the diff table
    assert "regressed: evil\\x1b[2J" in done.stderr
    text = markdown.read_text()
    assert "\x1b" not in text and "<img" not in text
    assert "evil\\x1b[2J\\x1b]0;pwned\\x07[red]x[/red]&lt;img src=x onerror=alert(1)&gt;" in text


def test_an_output_is_never_an_input_nor_replaced_without_force(tmp_path: Path) -> None:
    saved = _hostile_atlas(tmp_path / "a.json")
    kept = saved.read_text()
    done = _atlas_quick("--load", str(saved), "--markdown", str(saved), tmp_path=tmp_path)
    assert (done.returncode, done.stderr) == (
        2, f"nebisect: error: --markdown {saved}: overlaps --load {saved}, which it would "
           "overwrite; choose another --markdown\n")
    assert saved.read_text() == kept
    markdown = tmp_path / "old.md"
    markdown.write_text("my notes")
    done = _atlas_quick("--load", str(saved), "--markdown", str(markdown), tmp_path=tmp_path)
    assert (done.returncode, done.stderr) == (
        2, f"nebisect: error: --markdown {markdown}: exists (--force replaces it)\n")
    assert markdown.read_text() == "my notes"
    report = tmp_path / "report"
    report.mkdir()
    (report / "report.json").write_text("{}")
    done = _atlas_quick("--load", str(saved), "--report", str(report), tmp_path=tmp_path)
    assert (done.returncode, done.stderr) == (
        2, f"nebisect: error: --report {report / 'report.json'}: exists (--force replaces it)\n")
    done = _atlas_quick("--load", str(saved), "--markdown", str(markdown), "--report",
                        str(report), "--force", tmp_path=tmp_path)
    assert done.returncode == 1, done.stderr
    assert markdown.read_text().startswith("## nebisect converter atlas")
    assert json.loads((report / "report.json").read_text())["kind"] == "atlas"

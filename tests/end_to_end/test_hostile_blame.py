"""Blame and exit codes, end to end (issue #22, item 10).

A package whose program cannot load is an input error in every command: exit 2, one
line, no "precision" finding from ``run``. A target whose outputs are not numeric arrays
is that target's error verdict, not a failure of the reference that judged it. A
command that fails leaves no empty output directory (``bisect --out`` with nothing to
bisect, ``fuzz --report`` beside a full ``--corpus``) and prints no Python list for a
full disk (``fix apply``). Nothing is left behind in ``$TMPDIR``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support import SUPPORT
from support.bisect_programs import chain
from support.broken_packages import KINDS, broken, healthy
from support.full_disk import full_disk
from support.leftovers import Sandbox, one_error_line

NO_SPACE = os.strerror(28)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small weighted program that passes on sim:fp32, and its inputs."""
    return healthy(tmp_path_factory.mktemp("healthy"))


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path / "sandbox")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_package_that_cannot_load_is_an_input_error_in_every_command(
        kind: str, model: tuple[Path, Path], sandbox: Sandbox, tmp_path: Path) -> None:
    package = broken(model[0], tmp_path, kind)
    outputs = tmp_path / "outputs"
    commands = {
        "run": ["run", str(package), "-t", "sim:fp32", "--explore", "none",
                "--report", str(outputs / "report")],
        "lint": ["lint", str(package)],
        "bisect": ["bisect", str(package), "-t", "sim:fp32", "--inputs", str(model[1]),
                   "--out", str(outputs / "bisect")],
        "fix apply": ["fix", "apply", "logsumexp-max-shift", str(package),
                      "-o", str(outputs / "fixed.mlpackage")],
    }
    expected = f"nebisect: error: {package}: {KINDS[kind]}"
    for name, command in commands.items():
        done = sandbox.run(*command)
        assert done.returncode == 2, (name, done.stdout, done.stderr)
        assert one_error_line(done.stderr) == expected, name
        assert "precision" not in done.stdout, name
        assert not outputs.exists(), f"{name} left {sorted(outputs.rglob('*'))}"
    assert sandbox.leftovers() == []


def test_a_target_with_object_outputs_gets_the_blame_not_the_reference(
        model: tuple[Path, Path], sandbox: Sandbox) -> None:
    package, _ = model
    plugin = str(SUPPORT / "plugins_object.py")
    done = sandbox.run("run", str(package), "--plugin", plugin, "-t", "sim:object-out",
                       "-t", "sim:fp32", "--explore", "none", "--json")
    assert done.returncode == 1, done.stderr
    rows = json.loads(done.stdout)["rows"]
    assert [r["target"] for r in rows if r["role"] == "reference"] == []
    verdicts = {r["target"]: r["verdict"] for r in rows}
    assert verdicts["sim:fp32"]["status"] == "pass"
    blamed = verdicts["sim:object-out"]
    assert (blamed["status"], blamed["stage"]) == ("error", "predict")
    assert blamed["message"] == ("output 'out' has dtype object; a prediction's outputs "
                                 "must be numeric arrays (bool, integer or float)")
    # Used as the reference, the same plugin is the reference's failure, named as such.
    done = sandbox.run("run", str(package), "--plugin", plugin, "--reference",
                       "sim:object-out", "-t", "sim:fp32", "--explore", "none", "--json")
    assert done.returncode == 1, done.stderr
    [reference] = [r for r in json.loads(done.stdout)["rows"] if r["role"] == "reference"]
    assert reference["verdict"]["message"].endswith(
        "reference sim:object-out failed: output 'out' has dtype object; a prediction's "
        "outputs must be numeric arrays (bool, integer or float)")
    assert sandbox.leftovers() == []


def test_bisect_with_nothing_to_bisect_leaves_no_out_directory(
        model: tuple[Path, Path], sandbox: Sandbox, tmp_path: Path) -> None:
    package, inputs = model
    out = tmp_path / "results" / "bisect"
    done = sandbox.run("bisect", str(package), "-t", "sim:fp32", "--inputs", str(inputs),
                       "--out", str(out))
    assert done.returncode == 2, done.stderr
    assert one_error_line(done.stderr) == (
        f"nebisect: error: {package} does not fail on sim:fp32 at the predict stage "
        "(verdict pass); nothing to bisect")
    assert not (tmp_path / "results").exists()
    # An --out the user made beforehand is theirs: it stays, empty as it was.
    out.mkdir(parents=True)
    done = sandbox.run("bisect", str(package), "-t", "sim:fp32", "--inputs", str(inputs),
                       "--out", str(out))
    assert done.returncode == 2, done.stderr
    assert out.is_dir() and list(out.iterdir()) == []
    assert sandbox.leftovers() == []


def test_fix_apply_on_a_full_disk_is_one_plain_line(sandbox: Sandbox, tmp_path: Path) -> None:
    package, _ = chain(tmp_path, 12)
    with full_disk(tmp_path / "disk") as disk:
        fixed = disk / "fixed.mlpackage"
        done = sandbox.run("fix", "apply", "logsumexp-max-shift", str(package),
                           "-o", str(fixed))
        assert done.returncode == 2, done.stderr
        assert one_error_line(done.stderr) == f"nebisect: error: cannot write {fixed}: {NO_SPACE}"
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]
    assert sandbox.leftovers() == []


def test_fuzz_with_a_corpus_on_a_full_disk_leaves_no_empty_report(
        sandbox: Sandbox, tmp_path: Path) -> None:
    with full_disk(tmp_path / "disk") as disk:
        corpus, report = disk / "corpus", disk / "report"
        done = sandbox.run("fuzz", "--op", "reduce_log_sum_exp", "-t", "sim:ane",
                           "--budget", "30", "--corpus", str(corpus), "--report", str(report))
        assert done.returncode == 2, done.stderr
        assert sorted(p.name for p in disk.iterdir()) == ["corpus", "filler"]
        assert [p.name for p in corpus.iterdir()] == [".lock"]  # an empty corpus, no debris
        line = one_error_line(done.stderr)
        # The corpus, not the case's staging directory (gone by now), is named.
        assert line == f"nebisect: error: cannot write {corpus}: cannot copy: {NO_SPACE}"
    assert sandbox.leftovers() == []

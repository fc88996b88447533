"""Hostile inputs and outputs, end to end: zip-bomb and truncated ``--inputs``, a
``bisect --out`` that would overwrite the inputs or pass old files for new ones, and a
``bisect --out`` on a full disk. Each run: exit 2, one line naming the file and the
reason, nothing left behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.bisect_programs import chain
from support.full_disk import full_disk
from support.leftovers import Sandbox, one_error_line
from support.npz_bombs import compressed_zeros, declared_bomb

from nebisect.arrays import MAX_INPUT_BYTES_VAR

NO_SPACE = os.strerror(28)


@pytest.fixture(scope="module")
def chain12(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A 12-op program that collapses on sim:ane, and its inputs."""
    return chain(tmp_path_factory.mktemp("chain"), 12)


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path / "sandbox")


def test_run_refuses_a_zip_bomb_by_its_header(chain12: tuple[Path, Path], sandbox: Sandbox,
                                              tmp_path: Path) -> None:
    package, _ = chain12
    bomb = declared_bomb(tmp_path / "bomb.npz")
    done = sandbox.run("run", str(package), "-t", "sim:fp16", "--inputs", str(bomb))
    assert done.returncode == 2, done.stderr
    assert one_error_line(done.stderr) == (
        f"nebisect: error: {bomb}: member 'x' (float32 [131072, 131072]) is 64.0 GiB, over "
        f"the 1.0 GiB input limit (set {MAX_INPUT_BYTES_VAR} to raise it)")
    assert sandbox.leftovers() == []


def test_a_real_bomb_is_refused_under_a_lower_limit(chain12: tuple[Path, Path],
                                                    sandbox: Sandbox, tmp_path: Path) -> None:
    package, _ = chain12
    bomb = compressed_zeros(tmp_path / "zeros.npz", megabytes=16)
    done = sandbox.run("run", str(package), "-t", "sim:fp16", "--inputs", str(bomb),
                       **{MAX_INPUT_BYTES_VAR: str(1 << 20)})
    assert done.returncode == 2, done.stderr
    assert "member 'x' (float32 [4194304]) is 16.0 MiB, over the 1.0 MiB input limit" in (
        one_error_line(done.stderr))
    assert sandbox.leftovers() == []


def test_run_refuses_a_truncated_npz(chain12: tuple[Path, Path], sandbox: Sandbox,
                                     tmp_path: Path) -> None:
    package, inputs = chain12
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(inputs.read_bytes()[:-100])
    done = sandbox.run("run", str(package), "-t", "sim:fp16", "--inputs", str(truncated))
    assert done.returncode == 2, done.stderr
    assert one_error_line(done.stderr).startswith(
        f"nebisect: error: {truncated}: not a plain numeric .npz (")
    assert sandbox.leftovers() == []


def test_bisect_never_writes_over_its_inputs(chain12: tuple[Path, Path], sandbox: Sandbox,
                                             tmp_path: Path) -> None:
    package, inputs = chain12
    project = tmp_path / "project"
    project.mkdir()
    user_inputs = project / "inputs.npz"
    user_inputs.write_bytes(inputs.read_bytes())
    for force in ([], ["--force"]):
        done = sandbox.run("bisect", str(package), "-t", "sim:ane", "--inputs",
                           str(user_inputs), "--out", str(project), *force, timeout=60)
        assert done.returncode == 2, done.stderr
        assert one_error_line(done.stderr) == (
            f"nebisect: error: --out {project}: overlaps --inputs {user_inputs}, which it "
            "would overwrite; choose another --out")
    done = sandbox.run("bisect", str(package), "-t", "sim:ane", "--inputs", str(inputs),
                       "--out", str(package / "out"), "--force", timeout=60)
    assert done.returncode == 2 and "overlaps the source" in one_error_line(done.stderr)
    assert user_inputs.read_bytes() == inputs.read_bytes()
    assert sorted(p.name for p in project.iterdir()) == ["inputs.npz"]
    assert sandbox.leftovers() == []


def test_bisect_refuses_an_old_out_unless_forced_and_lists_only_what_it_wrote(
        chain12: tuple[Path, Path], sandbox: Sandbox, tmp_path: Path) -> None:
    package, inputs = chain12
    out = tmp_path / "out"
    out.mkdir()
    (out / "constants.npz").write_bytes(b"stale, from an older run")
    (out / "notes.txt").write_text("the user's")
    args = ["bisect", str(package), "-t", "sim:ane", "--inputs", str(inputs), "--out", str(out)]
    done = sandbox.run(*args, timeout=60)
    assert done.returncode == 2, done.stderr
    assert one_error_line(done.stderr) == (
        f"nebisect: error: --out {out}: is not empty (--force writes into it, replacing the "
        "files of the same names)")
    done = sandbox.run(*args, "--force", "--json", timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["files"] == ["inputs.npz", "minimized.mlpackage", "repro.py",
                                "summary.json"]
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["constants.npz", "notes.txt", *summary["files"]])
    assert (out / "notes.txt").read_text() == "the user's"
    assert sandbox.leftovers() == []


def test_bisect_on_a_full_disk_is_one_line_and_leaves_nothing(
        chain12: tuple[Path, Path], sandbox: Sandbox, tmp_path: Path) -> None:
    package, inputs = chain12
    with full_disk(tmp_path / "disk") as disk:
        out = disk / "out"
        done = sandbox.run("bisect", str(package), "-t", "sim:ane", "--inputs", str(inputs),
                           "--out", str(out), timeout=300)
        assert done.returncode == 2, done.stderr
        line = one_error_line(done.stderr)
        assert line.startswith(f"nebisect: error: cannot write {out}")
        assert line.endswith(f": {NO_SPACE}")
        # --out was new: a bisect that wrote nothing leaves none.
        assert sorted(p.name for p in disk.iterdir()) == ["filler"]
    assert sandbox.leftovers() == []


def test_a_package_whose_manifest_leads_outside_it_is_refused(
    chain12: tuple[Path, Path], sandbox: Sandbox, tmp_path: Path
) -> None:
    """The manifest points the root model at a working copy outside the package: a
    reader that follows it runs the model without a word."""
    import shutil

    package, _ = chain12
    escaping = tmp_path / "escaping.mlpackage"
    shutil.copytree(package, escaping)
    manifest = json.loads((escaping / "Manifest.json").read_text())
    root = manifest["itemInfoEntries"][manifest["rootModelIdentifier"]]
    shutil.copy(escaping / "Data" / root["path"], tmp_path / "model.mlmodel")
    root["path"] = "../../model.mlmodel"
    (escaping / "Manifest.json").write_text(json.dumps(manifest))
    message = (f"nebisect: error: {escaping}: Manifest.json names '../../model.mlmodel', a "
               "path outside the package")
    for command in (["run", str(escaping), "-t", "sim:fp32", "--explore", "none"],
                    ["lint", str(escaping)]):
        done = sandbox.run(*command)
        assert done.returncode == 2, done.stdout
        assert one_error_line(done.stderr) == message

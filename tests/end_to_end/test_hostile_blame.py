"""Blame and exit codes, end to end (issue #22, item 10).

A package whose program cannot load is an input error in every command: exit 2, one
line, no "precision" finding from ``run``. A command that fails leaves no empty output
directory (``bisect --out`` with nothing to bisect). Nothing is left behind in
``$TMPDIR``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.broken_packages import KINDS, broken, healthy
from support.leftovers import Sandbox


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small weighted program that passes on sim:fp32, and its inputs."""
    return healthy(tmp_path_factory.mktemp("healthy"))


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    return Sandbox(tmp_path / "sandbox")


def one_error_line(stderr: str) -> str:
    """The last stderr line, which must be the one error line (a progress display may
    precede it, a traceback may not)."""
    assert "Traceback" not in stderr
    line = stderr.strip().splitlines()[-1]
    assert line.startswith("nebisect: error: ")
    return line


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

"""Blame and exit codes, end to end (issue #22, item 10).

A command that fails leaves no empty output directory (``bisect --out`` with nothing
to bisect). Nothing is left behind in ``$TMPDIR``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.broken_packages import healthy
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

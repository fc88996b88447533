"""Output paths are checked before the work starts: one line, exit 2, nothing run."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO
from support.corpus_helpers import shipped_package

PACKAGE = str(shipped_package("log-softmax-fp16-underflow"))
UNWRITABLE = "/proc/no-such-dir"  # /proc takes no new directories, not even from root
MISSING = "(No such file or directory)"


@pytest.mark.parametrize(("args", "message"), [
    (["bisect", "examples/logsumexp_ne.py:model", "-t", "sim:ane", "--out", UNWRITABLE],
     f"--out {UNWRITABLE}: cannot create it {MISSING}"),
    (["fix", "apply", "logsumexp-max-shift", PACKAGE, "-o", f"{UNWRITABLE}/m.mlpackage"],
     f"--output {UNWRITABLE}: cannot create it {MISSING}"),
    (["lint", PACKAGE, "-o", f"{UNWRITABLE}/lint.txt"],
     f"--output {UNWRITABLE}: cannot create it {MISSING}"),
    (["replay", "corpus", "--junit", f"{UNWRITABLE}/junit.xml"],
     f"--junit {UNWRITABLE}: cannot create it {MISSING}"),
    (["replay", "corpus", "--junit", "corpus"], "--junit corpus: is a directory"),
    (["replay", "corpus", "--junit", "/sys/kernel/notes"],
     "--junit /sys/kernel/notes: cannot write it (Permission denied)"),
    (["lint", PACKAGE, "-o", "/sys/kernel/notes"],
     "--output /sys/kernel/notes: cannot write it (Permission denied)"),
    (["run", "examples/meanpool.py:model", "--report", UNWRITABLE],
     f"--report {UNWRITABLE}: cannot create it {MISSING}"),
    (["run", "examples/meanpool.py:model", "--markdown", f"{UNWRITABLE}/issue.md"],
     f"--markdown {UNWRITABLE}/issue.md: no directory {UNWRITABLE}"),
    (["run", "examples/meanpool.py:model", "--markdown", "/sys/kernel/notes"],
     "--markdown /sys/kernel/notes: cannot write it (Permission denied)"),
    (["run", "examples/meanpool.py:model", "--markdown", "corpus"],
     "--markdown corpus: is a directory"),
    (["run", "examples/meanpool.py:model", "--markdown", "examples/meanpool.py"],
     "--markdown examples/meanpool.py: overlaps the source examples/meanpool.py, which it "
     "would overwrite; choose another --markdown"),
])
def test_unwritable_outputs_fail_at_once(args: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "nebisect", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"nebisect: error: {message}"]


def test_an_output_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    """Outputs are renamed into place: over a FIFO (or /dev/null — never test with it: code
    without this check replaces the system's /dev/null) the rename would replace it."""
    fifo = tmp_path / "junit.xml"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "nebisect", "replay", "corpus", "--junit",
                           str(fifo)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"nebisect: error: --junit {fifo}: not a regular file"]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def _nebisect(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nebisect", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def _state(tree: Path) -> list[tuple[str, bytes]]:
    return sorted((str(p.relative_to(tree)), p.read_bytes() if p.is_file() else b"")
                  for p in tree.rglob("*"))


def test_an_output_never_writes_over_an_input(tmp_path: Path) -> None:
    """An output that is, or lies inside, what the command reads is refused, --force or
    not: ``fix apply SRC -o SRC`` replaced the source, ``lint SRC -o SRC/Manifest.json``
    overwrote its manifest."""
    import shutil

    source, corpus = tmp_path / "src.mlpackage", tmp_path / "corpus"
    shutil.copytree(PACKAGE, source)
    corpus.mkdir()
    before = _state(tmp_path)
    overlap = "overlaps {what}, which it would overwrite; choose another {option}"
    cases = [
        (["fix", "apply", "log-softmax-stable", str(source), "-o", str(source)],
         "--output", source, f"the source {source}"),
        (["fix", "apply", "log-softmax-stable", str(source), "-o", str(source / "in.mlpackage")],
         "--output", source / "in.mlpackage", f"the source {source}"),
        (["lint", str(source), "-o", str(source / "Manifest.json")],
         "--output", source / "Manifest.json", f"the source {source}"),
        (["replay", str(corpus), "--junit", str(corpus / "junit.xml")],
         "--junit", corpus / "junit.xml", f"the corpus {corpus}"),
        (["run", str(source), "-t", "sim:fp32", "--explore", "none", "--report",
          str(source / "report")], "--report", source / "report", f"the source {source}"),
    ]
    for args, option, output, what in cases:
        for force in ([], ["--force"]):
            done = _nebisect(*args, *force)
            assert done.returncode == 2, (args, done.stdout)
            assert done.stderr.splitlines() == [f"nebisect: error: {option} {output}: "
                                                + overlap.format(what=what, option=option)]
    assert _state(tmp_path) == before


def test_an_existing_output_is_replaced_only_with_force(tmp_path: Path) -> None:
    import shutil

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    package, report, junit = (tmp_path / "old.mlpackage", tmp_path / "lint.txt",
                              tmp_path / "junit.xml")
    shutil.copytree(PACKAGE, package)
    (package / "old-file").write_text("old\n")
    report.write_text("old\n")
    junit.write_text("old\n")
    cases = [
        (["fix", "apply", "log-softmax-stable", PACKAGE, "-o", str(package)], "--output", package,
         0),
        (["lint", PACKAGE, "-o", str(report)], "--output", report, 1),
        (["replay", str(corpus), "--allow-empty", "--junit", str(junit)], "--junit", junit, 0),
    ]
    for args, option, output, _ in cases:
        refused = _nebisect(*args)
        assert refused.returncode == 2, (args, refused.stdout)
        assert refused.stderr.splitlines() == [
            f"nebisect: error: {option} {output}: exists (--force replaces it)"]
    assert (package / "old-file").exists() and report.read_text() == junit.read_text() == "old\n"
    for args, _, _, code in cases:
        done = _nebisect(*args, "--force")
        assert done.returncode == code, (args, done.stderr)
    assert not (package / "old-file").exists()
    assert report.read_text() != "old\n" and junit.read_text().startswith("<?xml")


def test_a_runs_markdown_and_report_are_replaced_only_with_force(tmp_path: Path) -> None:
    """A second run into the same files would silently replace the first run's issue
    texts and report (the findings a user meant to keep or compare)."""
    issue, reports = tmp_path / "issue.md", tmp_path / "reports"
    issue.write_text("old\n")
    (reports / "function-1").mkdir(parents=True)
    (reports / "function-1" / "report.html").write_text("old\n")
    run = ["run", PACKAGE, "-t", "sim:fp32", "--explore", "none"]
    refused = [_nebisect(*run, "--markdown", str(issue)), _nebisect(*run, "--report", str(reports))]
    assert [done.returncode for done in refused] == [2, 2]
    assert [done.stderr.splitlines() for done in refused] == [
        [f"nebisect: error: --markdown {issue}: exists (--force replaces it)"],
        [f"nebisect: error: --report {reports}: holds the report of an earlier run "
         "(function-1/report.html; --force replaces it)"]]
    assert issue.read_text() == "old\n"
    assert sorted(p.name for p in reports.rglob("*")) == ["function-1", "report.html"]
    done = _nebisect(*run, "--markdown", str(issue), "--report", str(reports), "--force")
    assert done.returncode == 0, done.stderr
    assert issue.read_text() != "old\n" and (reports / "report.json").is_file()

"""Replay: expectations held against isolated runs, exit codes, JUnit, --update, the
pytest plugin. The corpus holds seed 000's 32-channel logsumexp, which collapses on
``sim:ane`` at x = 7.7 and is fine at x = 1."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from support import SUPPORT
from support.corpus_helpers import add, filled, lse_package

from nebisect.case import CaseOptions
from nebisect.corpus import Corpus, Expected
from nebisect.guard.replay import judge, replay
from nebisect.verdict import Verdict

NEBISECT = str(Path(sys.executable).parent / "nebisect")
COLLAPSE = "mismatch:collapse"


def test_judge_every_outcome() -> None:
    collapse = Verdict("mismatch", signature=COLLAPSE)
    nonfinite = Verdict("mismatch", signature="mismatch:nonfinite")
    passed = Verdict("pass")
    failing = Expected("failing", COLLAPSE)
    assert judge(failing, collapse) == ("ok", f"still fails as recorded: {COLLAPSE}")
    assert judge(failing, nonfinite) == (
        "regression", f"signature changed: {COLLAPSE} -> mismatch:nonfinite")
    assert judge(failing, passed)[0] == "improved"
    assert judge(Expected("pass"), passed) == ("ok", "passes (pass)")
    assert judge(Expected("fixed"), collapse) == (
        "regression", f"expected fixed, now fails: {COLLAPSE}")
    assert judge(Expected("fixed"), Verdict("skipped", message="no Core ML")) == (
        "skipped", "no Core ML")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    tmp = tmp_path_factory.mktemp("replay")
    package = lse_package(tmp / "lse.mlpackage")
    corpus = Corpus(tmp / "corpus", create=True)
    cliff, calm = filled("x", (1, 32), 7.7), filled("x", (1, 32), 1.0)
    add(corpus, package, cliff, Expected("failing", COLLAPSE), name="known-bug")
    add(corpus, package, cliff, Expected("failing", "mismatch:nonfinite"), name="bug-changed",
        options=CaseOptions(op_of_interest="reduce_log_sum_exp"))
    add(corpus, package, cliff, Expected("fixed"), name="fixed-regressed", target="sim:fp16-naive")
    add(corpus, package, calm, Expected("failing", COLLAPSE), name="now-passing")
    add(corpus, package, calm, Expected("pass"), name="calm", target="sim:fp16")
    add(corpus, package, calm, Expected("pass"), name="on-device", target="coreml:ne")
    return corpus


EXPECTED_OUTCOMES = {
    "known-bug": "ok", "bug-changed": "regression", "fixed-regressed": "regression",
    "now-passing": "improved", "calm": "ok", "on-device": "skipped",
}


def test_replay_cli_names_regressions_and_writes_junit(corpus: Corpus, tmp_path: Path) -> None:
    junit = tmp_path / "replay.xml"
    done = subprocess.run([NEBISECT, "replay", str(corpus.root), "--json", "--junit", str(junit)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stderr
    results = {r["label"]: r for r in json.loads(done.stdout)["results"]}
    assert {k: r["outcome"] for k, r in results.items()} == EXPECTED_OUTCOMES
    assert results["bug-changed"]["reason"] == (
        f"signature changed: mismatch:nonfinite -> {COLLAPSE}")
    assert results["fixed-regressed"]["verdict"]["signature"].startswith("mismatch:")
    if platform.system() != "Darwin":
        assert "coreml:ne unavailable here: requires macOS" in results["on-device"]["reason"]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("6", "2", "1")
    failed = {c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None}
    assert failed == {"bug-changed", "fixed-regressed"}


def test_parallel_update_rerecords_stale_expectations(
    corpus: Corpus, tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(corpus.root), str(copy)], check=True)
    done = subprocess.run([NEBISECT, "replay", str(copy), "--update", "--jobs", "2"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("re-recorded") == 3
    # the same outcomes as the serial run, on two isolated workers
    assert "6 case(s): 2 ok, 2 regression, 1 improved, 1 skipped" in done.stdout
    records = {c.record.label: c.record.expected for c in Corpus(copy).scan().cases}
    assert records["bug-changed"] == Expected("failing", COLLAPSE, "mismatch",
                                              records["bug-changed"].message)
    assert records["now-passing"].status == "fixed"
    assert records["fixed-regressed"].status == "failing"
    again = {r.label: r for r in replay(Corpus(copy).scan().cases, targets=["sim:*"]).results}
    assert {k: r.outcome for k, r in again.items()} == {
        **dict.fromkeys(EXPECTED_OUTCOMES, "ok"), "on-device": "skipped"}
    assert again["on-device"].reason == "target coreml:ne not selected by --target"


def test_pytest_plugin_turns_cases_into_items(corpus: Corpus, tmp_path: Path) -> None:
    copy = tmp_path / "corpus"
    subprocess.run(["cp", "-r", str(corpus.root), str(copy)], check=True)
    (copy / "0123456789abcdef").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA",
         "--rootdir", str(tmp_path), "--nebisect-corpus", str(copy)],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
    )
    assert done.returncode == 1, done.stdout
    ids = {c.record.label: c.case_id for c in corpus.scan().cases}
    lines = done.stdout.splitlines()

    def status_of(case_id: str) -> str:
        return next(ln.split()[0] for ln in lines if ln.split()[:1] and case_id in ln
                    and ln.split()[0] in ("PASSED", "FAILED", "SKIPPED"))

    assert status_of(ids["known-bug"]) == "PASSED"
    assert status_of(ids["bug-changed"]) == "FAILED"
    assert status_of(ids["fixed-regressed"]) == "FAILED"
    assert status_of(ids["now-passing"]) == "PASSED"
    assert status_of("0123456789abcdef") == "FAILED"
    assert "3 failed, 3 passed, 1 skipped" in done.stdout


def test_corpus_add_without_an_expectation_records_a_run(tmp_path: Path) -> None:
    from nebisect.arrays import save_npz

    package = lse_package(tmp_path / "lse.mlpackage")
    save_npz(tmp_path / "cliff.npz", filled("x", (1, 32), 7.7))
    save_npz(tmp_path / "calm.npz", filled("x", (1, 32), 1.0))
    done = subprocess.run([NEBISECT, "corpus", "add", str(tmp_path / "corpus"), str(package),
                           "--target", "sim:ane", "--inputs", str(tmp_path / "cliff.npz"),
                           "--inputs", str(tmp_path / "calm.npz")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith(f"sim:ane expected failing {COLLAPSE}")
    assert lines[1].endswith("sim:ane expected pass")
    records = [c.record for c in Corpus(tmp_path / "corpus").scan().cases]
    assert {r.expected.status for r in records} == {"failing", "pass"}
    assert all(r.provenance["isolation"] in ("fork", "spawn") for r in records)


@pytest.mark.parametrize(("filters", "allow_empty", "code"), [
    (["--target", "coreml:*"], False, 1),
    (["--target", "coreml:*"], True, 0),
])
def test_a_replay_that_ran_nothing_is_not_green(
    corpus: Corpus, filters: list[str], allow_empty: bool, code: int
) -> None:
    args = [NEBISECT, "replay", str(corpus.root), *filters]
    done = subprocess.run(args + (["--allow-empty"] if allow_empty else []),
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == code, done.stdout + done.stderr
    said = "nebisect: no case was replayed (6 case(s) in"
    assert (said in " ".join(done.stderr.split())) is not allow_empty
    assert "0 ok, 0 regression, 0 improved, 6 skipped" in done.stdout


def test_an_empty_corpus_replays_nothing_and_says_so(tmp_path: Path) -> None:
    Corpus(tmp_path / "empty", create=True)
    done = subprocess.run([NEBISECT, "replay", str(tmp_path / "empty")], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 1
    assert "no case was replayed (0 case(s) in" in " ".join(done.stderr.split())


def test_a_case_keeps_its_plugin_and_runs_from_a_private_copy(tmp_path: Path) -> None:
    """The plugin is stored in the case (``plugins/``) and loaded from there; two cases
    with the same plugin replay side by side (it registers its target once); a file
    dropped into a case after the scan is not in the copy that runs."""
    package = lse_package(tmp_path / "lse.mlpackage")
    corpus = Corpus(tmp_path / "corpus", create=True)
    plugin = SUPPORT / "plugins_fuzz.py"
    for value in (1.0, 2.0):
        add(corpus, package, filled("x", (1, 32), value), Expected("pass"),
            target="sim:fp16-nan-suppressing", options=CaseOptions(plugins=(str(plugin),)))
    cases = corpus.scan().cases
    assert [c.record.options.plugins for c in cases] == [("plugins/plugins_fuzz.py",)] * 2
    assert all((c.path / "plugins" / "plugins_fuzz.py").read_bytes() == plugin.read_bytes()
               for c in cases)
    (cases[0].path / "late.py").write_text("raise SystemExit('never imported')\n")
    copy = cases[0].private_copy(tmp_path / "private")
    assert sorted(p.name for p in copy.path.iterdir()) == [
        "case.json", "inputs.npz", "model.mlpackage", "plugins"]
    assert [r.outcome for r in replay(cases).results] == ["ok", "ok"]

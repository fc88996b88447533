"""fix verify: fixed / still failing / regressed / unaffected, against isolated runs.

Wrong fixes from ``fixes_plugin`` prove the two regression checks that a target's own
tolerance cannot see: a rewrite that changes the math (caught at fp64), and one that
moves an op off the Neural Engine (a pass on CPU fallback is not a pass on the NE)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import fixes_plugin  # noqa: F401  (registers the wrong-on-purpose fixes)
import pytest
from corpus_helpers import add, filled, lse_package, softplus_package

from nebisect.corpus import Corpus, Expected
from nebisect.fixes import resolve_fixes
from nebisect.fixes.verify import verify

NEBISECT = str(Path(sys.executable).parent / "nebisect")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    tmp = tmp_path_factory.mktemp("verify")
    lse, softplus = lse_package(tmp / "lse.mlpackage"), softplus_package(tmp / "sp.mlpackage")
    corpus = Corpus(tmp / "corpus", create=True)
    collapse = Expected("failing", "mismatch:collapse")
    add(corpus, lse, filled("x", (1, 32), 7.7), collapse, name="lse-cliff",
        fixes=("logsumexp-max-shift",))
    add(corpus, lse, filled("x", (1, 32), 1.0), Expected("pass"), name="lse-calm")
    add(corpus, softplus, filled("x", (1, 16), 10.5), collapse, name="softplus-cliff",
        fixes=("softplus-stable",))
    add(corpus, softplus, filled("x", (1, 16), 11.5), Expected("failing", "mismatch:nonfinite"),
        name="softplus-overflow", target="sim:fp16-naive")
    return corpus


def test_builtin_fixes_fix_their_cases_and_regress_nothing(corpus: Corpus) -> None:
    report = verify(corpus.scan().cases, resolve_fixes(["logsumexp-max-shift",
                                                         "softplus-stable"]), jobs=2)
    by_label = {c.label: c for c in report.cases}
    assert by_label["lse-cliff"].category == "fixed"
    assert by_label["lse-cliff"].rewrites == {"logsumexp-max-shift": 1, "softplus-stable": 0}
    assert by_label["lse-cliff"].before.signature == "mismatch:collapse"
    assert by_label["lse-calm"].category == "unaffected"
    assert by_label["softplus-cliff"].category == "fixed"
    assert by_label["softplus-overflow"].category == "fixed"
    assert by_label["softplus-overflow"].before.signature == "mismatch:nonfinite"
    assert report.ok and not report.broken_promises
    only_lse = verify([c for c in corpus.scan().cases if c.record.label == "softplus-cliff"],
                      resolve_fixes(["logsumexp-max-shift"]))
    assert only_lse.cases[0].category == "unaffected"
    assert only_lse.cases[0].detail == "no fix matched this case"


def test_a_fix_that_changes_the_math_is_a_regression(corpus: Corpus) -> None:
    cases = [c for c in corpus.scan().cases if c.record.label == "softplus-cliff"]
    report = verify(cases, resolve_fixes(["test-softplus-as-relu"]))
    case = report.cases[0]
    assert case.after is not None and case.after.status == "pass"
    assert case.category == "regressed"
    assert case.detail.startswith("the fix changes the math (fp64 vs original: mismatch:")
    assert not report.ok


def test_a_fix_that_moves_ops_off_the_neural_engine_is_a_regression(corpus: Corpus) -> None:
    cases = [c for c in corpus.scan().cases if c.record.label in ("lse-cliff", "lse-calm")]
    report = verify(cases, resolve_fixes(["test-logsumexp-fp32"]))
    by_label = {c.label: c for c in report.cases}
    for label in ("lse-cliff", "lse-calm"):
        assert by_label[label].category == "regressed", by_label[label].detail
        assert "placement moved off ne" in by_label[label].detail
        assert "reduce_log_sum_exp_0_wide on cpu" in by_label[label].detail
    assert not report.ok and not report.broken_promises


def test_cli_verify_exit_code_and_json(corpus: Corpus) -> None:
    done = subprocess.run([NEBISECT, "fix", "verify", str(corpus.root), "--fix",
                           "softplus-stable", "--json"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    cases = {c["label"]: c for c in json.loads(done.stdout)["cases"]}
    assert cases["softplus-cliff"]["category"] == "fixed"
    assert cases["lse-cliff"]["category"] == "unaffected"
    assert cases["lse-cliff"]["promise_broken"] is False
    unknown = subprocess.run([NEBISECT, "fix", "verify", str(corpus.root), "--fix", "nope"],
                             capture_output=True, text=True)
    assert unknown.returncode == 2 and "unknown fix 'nope'" in unknown.stderr

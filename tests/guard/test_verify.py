"""fix verify: fixed / still failing / regressed / unaffected, against isolated runs.

Wrong fixes from ``fixes_plugin`` prove the two regression checks that a target's own
tolerance cannot see: a rewrite that changes the math (caught at fp64), and one that
moves an op off the Neural Engine (a pass on CPU fallback is not a pass on the NE)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import fixes_plugin  # noqa: F401  (registers the wrong-on-purpose fixes)
from support.corpus_helpers import add, filled, lse_package, softplus_package

from nebisect.corpus import Corpus, Expected
from nebisect.fixes import resolve_fixes
from nebisect.guard.verify import verify

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


def test_wrong_fixes_are_regressions_even_when_the_target_passes(corpus: Corpus) -> None:
    labels = ("softplus-cliff", "lse-cliff", "lse-calm")
    cases = [c for c in corpus.scan().cases if c.record.label in labels]
    report = verify(cases, resolve_fixes(["test-softplus-as-relu", "test-logsumexp-fp32"]))
    by_label = {c.label: c for c in report.cases}

    math = by_label["softplus-cliff"]
    assert math.after is not None and math.after.status == "pass"
    assert math.category == "regressed"
    assert math.detail.startswith("the fix changes the math (fp64 vs original: mismatch:")
    for label in ("lse-cliff", "lse-calm"):
        moved = by_label[label]
        assert moved.category == "regressed", moved.detail
        assert "placement moved off ne" in moved.detail
        assert re.search(r"reduce_log_sum_exp_\d+_wide on cpu", moved.detail)
    assert not report.ok and not report.broken_promises


def test_cli_verify_exit_code_and_json(corpus: Corpus) -> None:
    done = subprocess.run([NEBISECT, "fix", "verify", str(corpus.root), "--fix",
                           "softplus-stable", "--json"], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    cases = {c["label"]: c for c in json.loads(done.stdout)["cases"]}
    assert cases["softplus-cliff"]["category"] == "fixed"
    assert cases["lse-cliff"]["category"] == "unaffected"
    assert cases["lse-cliff"]["detail"].startswith(
        "no fix matched this case (fixes claiming mismatch:collapse: ")
    assert "logsumexp-max-shift" in cases["lse-cliff"]["detail"]
    assert cases["lse-calm"]["detail"] == "no fix matched this case"
    assert cases["lse-cliff"]["promise_broken"] is False
    unknown = subprocess.run([NEBISECT, "fix", "verify", str(corpus.root), "--fix", "nope"],
                             capture_output=True, text=True)
    assert unknown.returncode == 2 and "unknown fix 'nope'" in unknown.stderr

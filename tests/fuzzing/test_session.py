"""Isolated fuzz sessions on the simulator: the acceptance scenarios of ``nebisect fuzz``."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support import SUPPORT

from nebisect.executors.runner import Runner
from nebisect.fuzzing.campaign import CampaignResult, Finding, localize_finding
from nebisect.fuzzing.execute import SubjectEvaluator
from nebisect.fuzzing.session import FuzzOptions, run_session
from nebisect.fuzzing.subject import OpSubject
from nebisect.isolate import Isolator
from nebisect.opspecs.ops import get_op
from nebisect.opspecs.strategies import delta

PLUGIN = str(SUPPORT / "plugins_fuzz.py")


@pytest.fixture(scope="module")
def warm() -> Iterator[Isolator]:
    """A persistent isolator (warm workers; failures re-confirmed in a fresh process), as
    ``fuzz`` runs its campaigns."""
    with Isolator("persistent") as persistent:
        yield persistent


def fuzz(isolator: Isolator, op: str, target: str, budget: int, **kw) -> CampaignResult:
    [result] = run_session([op], FuzzOptions(target=target, budget=budget, seed=0, **kw),
                           runner=Runner(isolator=isolator))
    return result


def adjacent(lo: float, hi: float) -> bool:
    return float(np.nextafter(np.float16(lo), np.float16(np.inf))) == hi


def test_logsumexp_collapse_on_simulated_neural_engine(warm: Isolator) -> None:
    result = fuzz(warm, "reduce_log_sum_exp", "sim:ane", 12, shrink_budget=40)
    collapses = [f for f in result.findings if f.signature == "mismatch:collapse"]
    assert collapses, result.statuses
    for finding in collapses:
        cliff = finding.cliff
        assert cliff is not None and adjacent(cliff.lo, cliff.hi) and not cliff.lo_fails
        assert cliff.predicted is not None and cliff.predicted["label"].startswith("log(65504/")
        assert cliff.distance is not None and cliff.distance < 0.01
        assert cliff.hi_output["output"] == 0.0
    assert all(f.verdict["metrics"]["reconfirmed"] for f in collapses)


def test_seed_000_cliff_for_32_delta_replicated_channels(warm: Isolator) -> None:
    subject = OpSubject(get_op("reduce_log_sum_exp"))
    case = {"program": {"op": "reduce_log_sum_exp", "dtype": "fp16",
                        "inputs": {"x": [1, 32, 8, 8]},
                        "params": {"axes": [1], "keep_dims": True}, "wrap": "none"},
            "values": {"x": delta(8.0)}}
    finding = Finding("reduce_log_sum_exp", subject.param_class(case), "mismatch:collapse",
                      "mismatch", "", case, case)
    evaluator = SubjectEvaluator(subject, "sim:ane", warm)
    try:
        cliff = localize_finding(subject, evaluator, finding)
    finally:
        evaluator.close()
    assert cliff is not None and adjacent(cliff.lo, cliff.hi)
    assert abs(cliff.lo - math.log(65504 / 32)) < 0.01, cliff.lo_output
    assert cliff.predictions <= 20
    assert cliff.predicted is not None and cliff.predicted["label"] == "log(65504/32)"
    assert cliff.lo_output["output"] == pytest.approx(cliff.lo + math.log(32), abs=0.02)


def test_careful_fp16_has_no_cliff_naive_fp16_has_the_graph_level_one(
    warm: Isolator,
) -> None:
    assert fuzz(warm, "reduce_log_sum_exp", "sim:fp16", 25).findings == []
    naive = fuzz(warm, "reduce_log_sum_exp", "sim:fp16-naive", 12, shrink_budget=40)
    overflow = [f for f in naive.findings if f.signature == "mismatch:nonfinite"]
    assert overflow and overflow[0].cliff is not None
    assert overflow[0].cliff.hi_output["output"] == math.inf


def test_softplus_cliff_on_simulated_neural_engine(warm: Isolator) -> None:
    result = fuzz(warm, "softplus", "sim:ane", 12)
    [finding] = [f for f in result.findings if f.signature == "mismatch:collapse"]
    assert finding.cliff is not None
    assert (finding.cliff.lo, finding.cliff.hi) == (10.390625, 10.3984375)
    assert finding.cliff.predicted is not None
    assert finding.cliff.predicted["label"] == "ln 2^15"


def test_nan_suppressing_max_is_caught_and_shrunk_to_rank_1(warm: Isolator) -> None:
    result = fuzz(warm, "reduce_max", "sim:fp16-nan-suppressing", 60,
                  plugins=(PLUGIN,), cliff=False)
    suppressed = [f for f in result.findings if f.signature == "mismatch:nan-suppressed"]
    assert suppressed, result.statuses
    full = [f for f in suppressed if "/axes=all/" in f.param_class + "/"]
    assert full
    for finding in full:
        [shape] = finding.case["program"]["inputs"].values()
        assert len(shape) == 1 and shape[0] <= 2


def test_same_seed_same_findings_through_isolation(warm: Isolator) -> None:
    def summary() -> list:
        result = fuzz(warm, "softplus", "sim:ane", 8, cliff=False)
        return [(f.key, f.case, f.first_case, f.hits) for f in result.findings]

    first = summary()
    assert first and summary() == first


def test_unsupported_ops_are_skipped_with_the_reason(warm: Isolator,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import nebisect.mil.kernels as kernels

    monkeypatch.setattr(kernels, "kernel_ops", lambda: ["relu"])
    [result] = run_session(["softplus"], FuzzOptions(target="sim:fp16", budget=5),
                           runner=Runner(isolator=warm))
    assert result.findings == [] and "no kernel for softplus" in result.skipped


def test_findings_go_to_the_corpus_and_replay_as_recorded(
    warm: Isolator, tmp_path: Path,
) -> None:
    from nebisect.corpus import Corpus
    from nebisect.fuzzing.store import record_finding
    from nebisect.guard.replay import replay_case

    result = fuzz(warm, "softplus", "sim:ane", 8, cliff=False)
    finding = result.findings[0]
    corpus = Corpus(tmp_path / "corpus", create=True)
    case_dir = record_finding(corpus, finding, OpSubject(get_op("softplus")), "sim:ane")
    [stored] = corpus.scan().cases
    assert str(stored.path) == case_dir
    assert stored.record.expected.signature == finding.signature
    assert "softplus on sim:ane" in stored.record.description
    replayed = replay_case(stored, warm, tmp_path)
    assert replayed.outcome == "ok", replayed.reason


def test_jobs_split_one_op_into_seeded_shards_and_merge_keeps_the_first() -> None:
    from nebisect.fuzzing.session import _units, merge

    spec = get_op("softplus")
    units = _units([spec], FuzzOptions(target="sim:fp16", budget=9, seed=2, jobs=2))
    assert [(u.budget, u.seed) for u in units] == [(5, 2018), (4, 2019)]
    assert len(_units([spec, get_op("exp")], FuzzOptions(target="sim:fp16", jobs=2))) == 2

    def part(hits: int, case: dict) -> CampaignResult:
        finding = Finding("softplus", "softplus", "mismatch:collapse", "mismatch", "", case, case,
                          hits=hits)
        return CampaignResult("softplus", 0, 5, generated=5, evaluations=7,
                              statuses={"pass": 7}, findings=[finding])

    merged = merge([part(2, {"a": 1}), part(3, {"a": 2})], seed=2, budget=9)
    assert (merged.generated, merged.evaluations, merged.statuses) == (10, 14, {"pass": 14})
    [finding] = merged.findings
    assert finding.case == {"a": 1} and finding.hits == 5

"""``nebisect fuzz SOURCE``: a whole model fuzzed with run's value families (issue 12 item 9).

* The subject and the engine, with a pure stand-in for the device (no conversion): the
  same seed gives the same findings; a finding shrinks to lint's guided probe and its
  cliff is the model-level bracket, beside the boundary lint predicts; dedup classes.
* The CLI as a user runs it on seed 000's model: the collapse on ``sim:ane``, localized
  to 7.62109375 | 7.625, written to a corpus that ``replay`` then holds to it.
* Usage errors: one line, exit 2, before anything is converted.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import REPO

from nebisect.case import CaseOptions
from nebisect.corpus import Corpus
from nebisect.detect.causes import RunFinding
from nebisect.fuzzing.campaign import Campaign, CampaignConfig, Evaluation
from nebisect.fuzzing.model_findings import model_findings
from nebisect.fuzzing.model_subject import ModelSubject, describe_case
from nebisect.search.cliff import Boundary
from nebisect.search.records import FailureGroup
from nebisect.sources.inputs import InputDescription
from nebisect.sources.resolve import Source
from nebisect.targets.spec import TargetSpec
from nebisect.verdict import Verdict

NEBISECT = [sys.executable, "-m", "nebisect"]
#: seed 000's overflow boundary: 32·exp(x) reaches fp16's largest value
LOG_65504_32 = math.log(65504 / 32)


def seed000_subject(paths: list[str] | None = None, seed: int = 0) -> ModelSubject:
    """Seed 000's input (1×1×8×8, example x = 2.5) with lint's boundary for it."""
    source = Source("torch", "/models/logsumexp_ne.py:model",
                    [InputDescription("x", "float32", [(1, 1), (1, 1), (8, 8), (8, 8)])],
                    {"x": np.full((1, 1, 8, 8), 2.5, np.float32)})
    return ModelSubject(source, paths or ["export", "trace"],
                        [Boundary("log(65504/32)", LOG_65504_32)], seed=seed)


def collapse_on_export(subject: ModelSubject) -> Any:
    """The device: channel logsumexp of 32 equal channels collapses to 0 once any finite
    element exceeds log(65504/32) — on the torch.export program only."""
    def evaluate(case: dict[str, Any]) -> Evaluation:
        x = subject.input_set(case).arrays["x"].astype(np.float64)
        finite = x[np.isfinite(x)]
        if case["path"] == "export" and finite.size and finite.max() > LOG_65504_32:
            return Evaluation(Verdict("mismatch", signature="mismatch:collapse"), 0.0, 11.09)
        return Evaluation(Verdict("pass"), 1.0, 1.0)
    return evaluate


def campaign(seed: int) -> dict[str, Any]:
    subject = seed000_subject()
    result = Campaign(subject, collapse_on_export(subject),
                      CampaignConfig(budget=30, seed=seed, shrink_budget=20)).run()
    body = result.to_dict()
    body.pop("elapsed")
    return body


def test_same_seed_same_findings_and_the_guided_cliff() -> None:
    first = campaign(0)
    assert first == campaign(0)
    findings = {f["param_class"]: f for f in first["findings"]}
    # Only the export program fails; the first case is lint's guided probe above the
    # boundary, so the constant fill is found first and shrinks to that probe.
    assert findings and all(key.startswith("export/") for key in findings)
    const = findings["export/const/x/base"]
    assert const["signature"] == "mismatch:collapse"
    assert const["case"] == {"path": "export", "length": 0, "family": "const", "x": 7.625}
    cliff = const["cliff"]
    assert (cliff["lo"], cliff["hi"], cliff["lo_fails"]) == (7.62109375, 7.625, False)
    assert cliff["predicted"]["label"] == "log(65504/32)" and cliff["predictions"] <= 20


def test_findings_group_as_run_groups_them_with_their_cliffs_attached() -> None:
    subject = seed000_subject()
    result = Campaign(subject, collapse_on_export(subject),
                      CampaignConfig(budget=30, seed=0, shrink_budget=20)).run()
    # explain=False evaluates nothing: the grouping alone, on no workbench
    found = model_findings(result, subject, None,  # type: ignore[arg-type]
                           TargetSpec.parse("sim:ane"), explain=False)
    [group] = found.groups  # every case fails on export with one signature: one bug
    assert (group.target, group.path, group.signature) == ("sim:ane", "export",
                                                           "mismatch:collapse")
    assert len(group.members) == len(result.findings) > 1
    assert group.smallest == min(group.members, key=lambda m: (m.magnitude, m.label))
    brackets = [(c.family, c.cliff.lo, c.cliff.hi) for c in group.cliffs]
    assert len(set(brackets)) == len(brackets)  # a bracket met by several cases: once
    const = next(c for c in group.cliffs if c.family == "const")
    assert (const.cliff.lo, const.cliff.hi) == (7.62109375, 7.625)
    [finding] = found.findings
    assert finding.symptom == "collapse" and finding.groups == [group]
    assert finding.shows == {"sim:ane": {"export": group.smallest.label}}
    assert FailureGroup.from_dict(group.to_dict()) == group


def test_dedup_class_cliff_family_and_description() -> None:
    subject = seed000_subject()
    variant = {"path": "trace", "length": 0, "family": "zeros", "label": "zeros(row=first)"}
    assert subject.param_class(variant) == "trace/zeros/x/base"
    # A variant's cliff is searched in the constant fill, where lint's boundaries apply.
    assert subject.family(variant, 3.0) == {"path": "trace", "length": 0, "family": "const",
                                            "x": 3.0}
    assert subject.family_start(variant) is None
    assert [b.label for b in subject.boundaries(variant)] == ["log(65504/32)"]
    spike = {"path": "export", "length": 0, "family": "spike", "x": 4.0}
    assert subject.boundaries(spike) == [] and subject.family_start(spike) == 4.0
    # A one-parameter family localizes in itself: one element at x over the example's 2.5.
    x = subject.input_set(subject.family(spike, 8.0)).arrays["x"]
    assert sorted(np.unique(x, return_counts=True)[1]) == [1, 63] and x.max() == 8.0
    assert describe_case(spike) == "spike(x=4.0) on export, base inputs"
    assert subject.name == "logsumexp_ne.py:model"


def fuzz(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NEBISECT, "fuzz", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=600)


@pytest.mark.slow
def test_seed000_collapse_is_found_localized_stored_and_replayed(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    done = fuzz("examples/logsumexp_ne.py:model", "--target", "sim:ane", "--budget", "2",
                "--seed", "0", "--shrink-budget", "2", "--corpus", str(corpus), "--json")
    assert done.returncode == 1, done.stderr  # a failure was found
    [result] = json.loads(done.stdout)["results"]
    found = {f["param_class"]: f for f in result["findings"]}
    finding = found["export/const/x/base"]
    assert finding["signature"] == "mismatch:collapse"
    cliff = finding["cliff"]
    assert (cliff["lo"], cliff["hi"]) == (7.62109375, 7.625)
    assert cliff["predicted"]["label"] == "log(65504/32)"
    # the findings as run reports them: where the collapse enters, at which op
    body = json.loads(done.stdout)
    [explained] = [RunFinding.from_dict(f) for f in body["findings"]]
    assert (explained.attribution, explained.op_type, explained.symptom) == (
        "device", "reduce_log_sum_exp", "collapse")
    assert explained.title.startswith("device: reduce_log_sum_exp collapses its output")
    assert {(g.path, g.culprit.op_type if g.culprit else "") for g in explained.groups} <= {
        ("export", "reduce_log_sum_exp"), ("trace", "reduce_log_sum_exp")}
    assert [FailureGroup.from_dict(g) for g in body["groups"]] == explained.groups
    case = Corpus(corpus).find(Path(finding["case_dir"]).name)
    assert case.record.source_kind == "torch"
    assert case.record.options == CaseOptions(convert_path="export")
    assert case.record.expected.signature == "mismatch:collapse"
    replayed = subprocess.run([*NEBISECT, "replay", str(corpus), "--target", "sim:ane",
                               "--json"], capture_output=True, text=True, cwd=REPO,
                              timeout=600)
    assert replayed.returncode == 0, replayed.stderr  # the known bug, still failing as recorded
    outcomes = {(r["label"], r["outcome"], r["verdict"]["signature"])
                for r in json.loads(replayed.stdout)["results"]}
    assert (case.record.label, "ok", "mismatch:collapse") in outcomes


@pytest.mark.parametrize(("args", "message"), [
    (["examples/nope.py:model"], "examples/nope.py: no such file"),
    (["examples/logsumexp_ne.py:model", "--op", "softplus"],
     "give either SOURCE (a model) or --op (ops), not both"),
    (["examples/logsumexp_ne.py:model", "--wrap", "ne-attract"], "--wrap is for --op campaigns"),
])
def test_bad_source_and_mixed_forms_are_one_line_exit_2(args: list[str], message: str) -> None:
    done = fuzz(*args)
    assert done.returncode == 2
    assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_help_teaches_both_forms() -> None:
    from typer.testing import CliRunner

    from nebisect.cli import app

    text = " ".join(CliRunner().invoke(app, ["fuzz", "--help"], terminal_width=200).output.split())
    assert "nebisect fuzz --op reduce_log_sum_exp" in text
    assert "nebisect fuzz examples/logsumexp_ne.py:model" in text
    assert "SOURCE" in text and "--convert" in text

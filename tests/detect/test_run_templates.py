"""A run of a torch source starts two templates: the conversion's and the evaluations'.

The job that records a failing cell's intermediates, to name the op where the failure
enters, once started a third (a simulator-only template, blocking torch): seconds of
coremltools import before the first failing cell's op was named, in the middle of the
exploration. It runs among the cells, in their template.
"""

from __future__ import annotations

from typing import Any

import pytest
from support import REPO

import nebisect
from nebisect.isolation.fork import ForkBackend
from nebisect.isolation.needs import Needs

SOURCE = str(REPO / "examples" / "logsumexp_ne.py") + ":model"


def test_the_op_of_a_finding_is_named_in_the_cells_template(
        monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[Needs] = []
    start = ForkBackend._start

    def recording(self: ForkBackend, key: Needs) -> Any:
        started.append(key)
        return start(self, key)

    monkeypatch.setattr(ForkBackend, "_start", recording)
    result = nebisect.run(SOURCE, target="sim:ane", convert="export", budget=4,
                          families="const", progress=False)
    [finding] = result.findings
    culprit = finding.representative.culprit
    assert culprit is not None and culprit.op_type == "reduce_log_sum_exp"
    assert len(started) == 2
    conversion, evaluation = started
    assert "nebisect.mil.interp" not in conversion.imports
    assert {"torch", "coremltools", "nebisect.mil.interp"} <= set(evaluation.imports)
    assert evaluation.blocks == ()

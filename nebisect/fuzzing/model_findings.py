"""A model campaign's findings as ``run`` reports them: failure groups merged by root cause.

The campaign keeps one shrunk case per (signature, parameter class): what shrinking
and the corpus keep apart. A reader wants the bug, in ``run``'s words: where it enters
(conversion, precision, device), at which op, on which paths, from which smallest
trigger. So each shrunk case, with the verdict the campaign recorded, is explained on the
session's workbench (its conversions already made) by the
:class:`~nebisect.detect.attribution.Attributor` that ``run`` uses. It becomes a
:class:`~nebisect.detect.findings.Row`; the rows are grouped into
:class:`~nebisect.search.records.FailureGroup` records and merged into findings by
``run``'s own :func:`~nebisect.detect.matrix.grouped`. Each case's cliff joins its
group as the :class:`~nebisect.search.records.CliffFinding` ``run``'s exploration
would have localized. Explaining costs up to three predictions per case, each a cell
of the workbench: cached, and made once the campaign is over.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nebisect.detect.attribution import Attributor
from nebisect.detect.causes import RunFinding
from nebisect.detect.findings import Row
from nebisect.detect.matrix import grouped
from nebisect.detect.realistic import value_scale
from nebisect.evaluate.workbench import CellKey, Workbench
from nebisect.fuzzing.campaign import CampaignResult, Finding
from nebisect.fuzzing.model_subject import ModelSubject, cliff_family
from nebisect.search.records import CliffFinding, FailureGroup, GroupKey, culprit_key
from nebisect.targets.spec import TargetSpec
from nebisect.verdict import Verdict


@dataclass
class ModelFindings:
    """A model campaign's failure groups and the findings merged from them (both in
    ``run --json``'s forms)."""

    groups: list[FailureGroup] = field(default_factory=list)
    findings: list[RunFinding] = field(default_factory=list)


def model_findings(result: CampaignResult, subject: ModelSubject, bench: Workbench,
                   target: TargetSpec, *, explain: bool = True) -> ModelFindings:
    """``result``'s findings on ``target`` explained, grouped and merged (see the
    module docstring). Without ``explain`` (a campaign being stopped) nothing is
    evaluated: the groups carry no attribution nor culprit."""
    attributor = Attributor(bench) if explain else None
    rows: list[Row] = []
    cliffs: dict[tuple[object, ...], CliffFinding] = {}
    for finding in result.findings:
        row = _row(finding, subject, bench, attributor, target)
        rows.append(row)
        if finding.cliff is not None:
            cliff = CliffFinding(cliff_family(finding.case), row.verdict.signature,
                                 culprit_key(row.attribution, row.culprit), row.path,
                                 finding.cliff, spent=finding.cliff.predictions)
            # cases of several families localize in one (const, for a family without a
            # parameter): one bracket of a group is shown once, the first found
            cliffs.setdefault((GroupKey.of_cliff(str(target), cliff), cliff.family,
                               cliff.cliff.lo, cliff.cliff.hi), cliff)
    paths = [path for path in subject.paths if path]  # a package's one program: none
    return ModelFindings(*grouped(rows, {str(target): list(cliffs.values())},
                                  _example_scale(subject), paths))


def _row(finding: Finding, subject: ModelSubject, bench: Workbench,
         attributor: Attributor | None, target: TargetSpec) -> Row:
    """The row of ``finding``'s shrunk case on ``target`` (its verdict as the campaign
    recorded it), with its attribution and culprit when ``attributor`` is given."""
    input_set = subject.input_set(finding.case)
    path = str(finding.case["path"])
    verdict = Verdict.from_dict(finding.verdict)
    row = Row(str(target), int(finding.case["length"]), verdict, path=path,
              input_set=input_set.member)
    if attributor is not None:
        npz = bench.save_inputs(input_set.arrays, input_set.label)
        row.attribution, row.culprit = attributor.explain(CellKey(target, path, npz), verdict)
    return row


def _example_scale(subject: ModelSubject) -> float:
    """The largest |value| of the factory's example (1.0 without one): what a trigger's
    distance is measured from, as in ``run``."""
    example = subject.source.example or {}
    return value_scale(example, [name for name, array in example.items()
                                 if np.asarray(array).dtype.kind == "f"])

"""The records of a run: one :class:`Row` per cell evaluated, grouped into the
:class:`~nebisect.search.records.FailureGroup` per bug that exploration also fills.

* :class:`Row` — one evaluation of one input set on one target and conversion path:
  the verdict, and for a failure its attribution and culprit op. Every prediction the
  run makes for the matrix or the exploration is a row (``explored`` tells them apart),
  so plots and later tools can replay what was seen.
* :func:`group_failures` — failing rows with one
  :class:`~nebisect.search.records.GroupKey` (target, signature, attribution and
  culprit op type, conversion path) as one group: its smallest member (nearest a
  benign input: the shrink key of the value families), every input set it covers,
  and the model-level cliffs localized for it.

All JSON round-trip; nothing here runs anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar

from nebisect.codec import Form, Record
from nebisect.inputs.families import Member
from nebisect.search.records import CliffFinding, Culprit, FailureGroup, GroupKey, culprit_key
from nebisect.verdict import Verdict


@dataclass
class Row(Record):
    """One cell: a target on a conversion path at one input set, its verdict and, when
    it fails, where the divergence enters. ``role`` is ``reference`` for the row of a
    reference that failed at this input set; ``length`` is 0 unless the input set is a
    generated length. Its JSON puts the identity first and the verdict last."""

    json_form: ClassVar[Form] = Form(order=("target", "length", "role", "path", "input_set",
                                            "explored", "attribution", "culprit", "verdict"))

    target: str
    length: int
    verdict: Verdict
    attribution: str = ""
    role: str = "target"
    path: str = ""
    input_set: Member = field(default_factory=lambda: Member("length", "static"))
    culprit: Culprit | None = None
    explored: bool = False

    @property
    def key(self) -> GroupKey:
        return GroupKey(self.target, self.verdict.signature,
                        culprit_key(self.attribution, self.culprit), self.path)

    @property
    def reference_at_generated(self) -> bool:
        """Is this the reference failing at inputs nebisect generated (a length, not the
        example nor the user's ``--inputs``)?"""
        return self.role == "reference" and self.input_set.family == "length"



def group_failures(
    rows: Iterable[Row], cliffs: dict[str, list[CliffFinding]]
) -> list[FailureGroup]:
    """Failing target rows grouped by key, in first-seen order; ``cliffs`` (per target)
    are attached to the group whose (signature, culprit, path) they localized."""
    groups: dict[GroupKey, FailureGroup] = {}
    for row in rows:
        if row.role != "target" or not row.verdict.failed:
            continue
        group = groups.get(row.key)
        step = row.verdict.target_facts.steps or 0
        if group is None:
            groups[row.key] = FailureGroup.starting(row.key, row.attribution, row.culprit,
                                                    row.input_set, row.verdict.message, step)
        else:
            group.add(row.input_set, row.verdict.message, step)
    for target, found in cliffs.items():
        for cliff in found:
            key = GroupKey.of_cliff(target, cliff)
            if key in groups:
                groups[key].cliffs.append(cliff)
    return list(groups.values())



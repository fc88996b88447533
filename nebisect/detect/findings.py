"""The records of a run: one :class:`Row` per cell evaluated, :class:`FailureGroup` per bug.

* :class:`Row` — one evaluation of one input set on one target and conversion path:
  the verdict, and for a failure its attribution and culprit op. Every prediction the
  run makes for the matrix or the exploration is a row (``explored`` tells them apart),
  so plots and later tools can replay what was seen.
* :class:`FailureGroup` — failing rows with one (target, signature, attribution and
  culprit op type, conversion path): one bug, however many input sets show it. It keeps its smallest
  member (nearest a benign input: the shrink key of the value families), every input
  set it covers, and the model-level cliffs localized for it.

All JSON round-trip; nothing here runs anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import ClassVar

from nebisect.codec import Form, Record
from nebisect.detect.culprit import Culprit
from nebisect.inputs.families import Member
from nebisect.search.records import CliffFinding
from nebisect.verdict import Verdict


@dataclass(frozen=True)
class GroupKey:
    """What tells one bug of a run from another: the target, the signature, the culprit
    key (:func:`culprit_key`) and the conversion path. Rows, failure groups and the cliffs
    exploration localized all name theirs by it."""

    target: str
    signature: str
    culprit: str
    path: str

    @classmethod
    def of_cliff(cls, target: str, cliff: CliffFinding) -> GroupKey:
        """The key of the group a cliff localized on ``target`` belongs to."""
        return cls(target, cliff.signature, cliff.culprit, cliff.path)


def culprit_key(attribution: str, culprit: Culprit | None) -> str:
    """What a group's culprit is keyed by: the attribution and the op type
    (``device at reduce_log_sum_exp``; ``?`` when no op could be named). The attribution
    is part of it because one op can be a conversion bug at one input and a precision
    hazard at another: two bugs. It is also the engine's opaque ``culprit`` key."""
    return f"{attribution} at {culprit.op_type if culprit else '?'}"


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



@dataclass
class FailureGroup(Record):
    """One bug on one target and path (see the module docstring)."""

    target: str
    path: str
    signature: str
    attribution: str
    culprit: Culprit | None
    smallest: Member
    message: str = ""
    members: list[Member] = field(default_factory=list)
    cliffs: list[CliffFinding] = field(default_factory=list)

    @property
    def key(self) -> GroupKey:
        return GroupKey(self.target, self.signature, culprit_key(self.attribution, self.culprit),
                        self.path)



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
        if group is None:
            group = groups[row.key] = FailureGroup(
                row.target, row.path, row.verdict.signature, row.attribution, row.culprit,
                row.input_set, row.verdict.message)
        if all(m.label != row.input_set.label for m in group.members):
            group.members.append(row.input_set)
        if _shrink_key(row.input_set) < _shrink_key(group.smallest):
            group.smallest, group.message = row.input_set, row.verdict.message
    for target, found in cliffs.items():
        for cliff in found:
            key = GroupKey.of_cliff(target, cliff)
            if key in groups:
                groups[key].cliffs.append(cliff)
    return list(groups.values())


def _shrink_key(member: Member) -> tuple[float, str]:
    return (member.magnitude, member.label)



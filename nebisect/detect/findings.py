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
from typing import Any

from nebisect.detect.culprit import Culprit
from nebisect.inputs.families import Member
from nebisect.search.records import CliffFinding
from nebisect.verdict import Verdict

#: (target, signature, culprit key, conversion path)
GroupKey = tuple[str, str, str, str]


def culprit_key(attribution: str, culprit: Culprit | None) -> str:
    """What a group's culprit is keyed by: the attribution and the op type
    (``device at reduce_log_sum_exp``; ``?`` when no op could be named). The attribution
    is part of it because one op can be a conversion bug at one input and a precision
    hazard at another: two bugs. It is also the engine's opaque ``culprit`` key."""
    return f"{attribution} at {culprit.op_type if culprit else '?'}"


@dataclass
class Row:
    """One cell: a target on a conversion path at one input set, its verdict and, when
    it fails, where the divergence enters. ``role`` is ``reference`` for the row of a
    reference that failed at this input set; ``length`` is 0 unless the input set is a
    generated length."""

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
        return (self.target, self.verdict.signature, culprit_key(self.attribution, self.culprit),
                self.path)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "length": self.length, "role": self.role,
                "path": self.path, "input_set": self.input_set.to_dict(),
                "explored": self.explored, "attribution": self.attribution,
                "culprit": None if self.culprit is None else self.culprit.to_dict(),
                "verdict": self.verdict.to_dict()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Row:
        culprit = data.get("culprit")
        return cls(data["target"], int(data["length"]), Verdict.from_dict(data["verdict"]),
                   data.get("attribution", ""), data.get("role", "target"), data.get("path", ""),
                   Member.from_dict(data["input_set"]),
                   None if culprit is None else Culprit.from_dict(culprit),
                   bool(data.get("explored", False)))


@dataclass
class FailureGroup:
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
        return (self.target, self.signature, culprit_key(self.attribution, self.culprit),
                self.path)

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "path": self.path, "signature": self.signature,
                "attribution": self.attribution,
                "culprit": None if self.culprit is None else self.culprit.to_dict(),
                "smallest": self.smallest.to_dict(), "message": self.message,
                "members": [m.to_dict() for m in self.members],
                "cliffs": [c.to_dict() for c in self.cliffs]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FailureGroup:
        culprit = data.get("culprit")
        return cls(data["target"], data["path"], data["signature"], data["attribution"],
                   None if culprit is None else Culprit.from_dict(culprit),
                   Member.from_dict(data["smallest"]), data.get("message", ""),
                   [Member.from_dict(m) for m in data.get("members", [])],
                   [CliffFinding.from_dict(c) for c in data.get("cliffs", [])])


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
            key = (target, cliff.signature, cliff.culprit, cliff.path)
            if key in groups:
                groups[key].cliffs.append(cliff)
    return list(groups.values())


def _shrink_key(member: Member) -> tuple[float, str]:
    return (member.magnitude, member.label)



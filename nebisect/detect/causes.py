"""One bug, one finding: failure groups merged by root cause.

A :class:`~nebisect.detect.findings.FailureGroup` is one bug on one target and one
conversion path. The same converter bug shows on every target and both paths, so a
user reading groups reads it six times. A :class:`RunFinding` is the root cause they share:
failure groups with one **culprit op type** (the MIL op where the failure enters; an
error with no op is told apart by its normalized message, its shapes aside: a data-dependent
output typed ``[1, ?, 1000]`` on one path and ``[?, ?, 1000]`` on the other is one refusal),
one **symptom class**
(:func:`symptom_of`: crash, timeout, oom, an error at a stage, nonfinite, collapse,
shape, integer, tolerance, unrouted) and, for every symptom but a numeric one, one
**attribution** (``conversion`` / ``precision`` / ``device``); a ``compression`` failure keeps
its attribution whatever its symptom. Two culprits or two symptoms stay two findings.

A numeric failure at one op is one bug wherever the probes place it: the same lowering
that overflows fp16 at |x| ≈ 5 makes the exact program diverge from torch at |x| ≈ 30,
and attribution says ``precision`` for the first, ``conversion`` for the second. The
finding takes the attribution of its smallest trigger and lists the others. Two folds
keep a cliff one finding:

* ``tolerance`` failures at an op that also overflows (``nonfinite`` / ``collapse``)
  are the same bug approaching its cliff;
* ``tolerance`` failures no op could be named for are explained by a numeric finding
  at a named op that fails on every target they show on, from a trigger at most
  :data:`EXPLAINS_WITHIN` times theirs (the output drifts a step before the op breaks).

A finding carries where it shows (target × conversion path: the first failing input
set, or ``pass``), its smallest trigger over every group, the cliffs localized for it
and, for an error, the error's text. Findings are ordered by severity
(:data:`SEVERITY`), then by how benign their trigger is (the caller's ``distance``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nebisect.detect.findings import Row
from nebisect.search.records import CliffFinding, FailureGroup
from nebisect.search.space import Member
from nebisect.sources.convert import is_cured_failure
from nebisect.verdict import Status

#: a shape in an error's message (``[?, ?, N]``): which dimension a path left flexible
#: is not another cause
SHAPE_IN_MESSAGE = re.compile(r"\[[^\[\]]*\]")
#: symptom classes, most severe first: a crash takes the process down, an error loses
#: the model, a nonfinite or collapsed output is silently useless, a wrong shape or
#: integer breaks the consumer, a tolerance miss degrades it, placement costs speed
SEVERITY = ("crash", "timeout", "oom", "error", "nonfinite", "collapse", "shape", "integer",
            "tolerance", "unrouted")
#: symptoms that fold the ``tolerance`` failures of the same op
CLIFF_SYMPTOMS = ("nonfinite", "collapse")
#: numeric symptoms: one finding per op, whatever the attribution
NUMERIC_SYMPTOMS = (*CLIFF_SYMPTOMS, "tolerance")
#: the attribution a numeric symptom keeps: compression is a cause of its own, never the
#: same bug as an fp16 overflow at the same op type
COMPRESSION = "compression"
#: how much larger a named op's smallest trigger may be than that of the unnamed
#: tolerance failures it explains
EXPLAINS_WITHIN = 2.0


@dataclass(frozen=True)
class CauseKey:
    """What one root cause is (see the module docstring): where it enters (empty for a
    numeric symptom, which any stage may show), the culprit op type, the symptom, and
    for an error the ``stage:message`` it fails with."""

    attribution: str
    op: str
    symptom: str
    error: str

#: the cell value of a target and path the finding does not show on
PASS = "pass"
#: ... and of one that fails there for another reason (so nothing says it would pass)
OTHER = "another failure"


def symptom_of(signature: str) -> str:
    """The symptom class of a failing verdict's signature, whose first field is its
    status: the status for crashes, timeouts, OOMs, errors and placement; for a
    mismatch, its kind (``nan-suppressed`` counts as ``nonfinite``: a NaN the device hid
    is still a nonfinite value)."""
    status, _, rest = signature.partition(":")
    if status == Status.MISMATCH:
        kind = rest or "tolerance"
        return "nonfinite" if kind == "nan-suppressed" else kind
    return status


def _stage_and_message(signature: str) -> tuple[str, str]:
    """``error:<stage>:<normalized message>`` → (stage, message)."""
    _, _, rest = signature.partition(":")
    stage, _, message = rest.partition(":")
    return stage, message


@dataclass
class RunFinding:
    """One root cause (see the module docstring). ``number`` is its position in the
    run's findings, from 1 (what ``--save-triggers`` and ``bisect --finding`` count);
    ``shows`` maps target → conversion path → the label of the smallest input set it
    fails at there, or ``pass``."""

    number: int
    op_type: str
    symptom: str
    groups: list[FailureGroup]
    shows: dict[str, dict[str, str]] = field(default_factory=dict)
    title: str = ""

    @property
    def attribution(self) -> str:
        """Where the failure enters at its smallest trigger."""
        return self.representative.attribution

    @property
    def attributions(self) -> list[str]:
        """Every attribution its groups carry, that of the smallest trigger first."""
        return list(dict.fromkeys([self.attribution, *(g.attribution for g in self.groups)]))

    @property
    def severity(self) -> int:
        return SEVERITY.index(self.symptom) if self.symptom in SEVERITY else len(SEVERITY)

    @property
    def representative(self) -> FailureGroup:
        """The group with the smallest trigger (ties: the first): what ``next`` bisects."""
        return min(self.groups, key=lambda g: (g.smallest.magnitude, g.smallest.label))

    @property
    def smallest(self) -> Member:
        return self.representative.smallest

    @property
    def message(self) -> str:
        """The error text of an error finding (its smallest group's message)."""
        return self.representative.message

    @property
    def stage(self) -> str:
        """The stage an error finding fails at (``convert``, ``load``, …; else '')."""
        return _stage_and_message(self.representative.signature)[0] if \
            self.symptom == "error" else ""

    @property
    def targets(self) -> list[str]:
        return list(dict.fromkeys(g.target for g in self.groups))

    @property
    def paths(self) -> list[str]:
        return list(dict.fromkeys(g.path for g in self.groups))

    @property
    def cliffs(self) -> list[tuple[str, CliffFinding]]:
        """(target, cliff) for every cliff localized for one of its groups."""
        return [(g.target, cliff) for g in self.groups for cliff in g.cliffs]

    def to_dict(self) -> dict[str, Any]:
        """``run --json``'s finding, written by hand rather than by the codec: it adds
        the facts derived from the groups (attribution, stage, targets…) where a reader
        looks first, and each localized cliff as a short summary; reading it back keeps
        only what it is built from."""
        return {"number": self.number, "title": self.title,
                "attribution": self.attribution, "attributions": self.attributions,
                "op_type": self.op_type,
                "symptom": self.symptom, "severity": self.severity,
                "stage": self.stage, "message": self.message,
                "targets": self.targets, "paths": self.paths,
                "smallest": self.smallest.to_dict(), "shows": self.shows,
                "cliffs": [{"target": target, "family": c.family, "path": c.path,
                            "lo": c.cliff.lo, "hi": c.cliff.hi, "complete": c.complete}
                           for target, c in self.cliffs],
                "groups": [g.to_dict() for g in self.groups]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunFinding:
        return cls(int(data["number"]), str(data["op_type"]), str(data["symptom"]),
                   [FailureGroup.from_dict(g) for g in data.get("groups", [])],
                   {t: dict(p) for t, p in data.get("shows", {}).items()},
                   str(data.get("title", "")))


def cause_of(group: FailureGroup) -> CauseKey:
    """The root-cause key of a failure group (see the module docstring)."""
    symptom = symptom_of(group.signature)
    op = group.culprit.op_type if group.culprit is not None else ""
    message = _stage_and_message(group.signature)[1] if symptom == "error" and not op else ""
    stage = _stage_and_message(group.signature)[0] if symptom == "error" else ""
    attribution = "" if symptom in NUMERIC_SYMPTOMS and group.attribution != COMPRESSION else (
        group.attribution)
    message = SHAPE_IN_MESSAGE.sub("[shape]", message)
    return CauseKey(attribution, op, symptom, f"{stage}:{message}" if stage else "")


def root_causes(groups: Sequence[FailureGroup], rows: Iterable[Row],
                distance: Callable[[float], float],
                title: Callable[[RunFinding], str]) -> list[RunFinding]:
    """The findings of a run's failure groups: merged by :func:`cause_of`, tolerance
    folded into a cliff at the same op, ordered by severity then ``distance`` of the
    smallest trigger (orders of magnitude from the example), numbered, titled."""
    merged: dict[CauseKey, list[FailureGroup]] = {}
    for group in groups:
        merged.setdefault(cause_of(group), []).append(group)
    for key in [k for k in merged if k.symptom == "tolerance"]:
        cliff = next((k for k in merged if (k.attribution, k.op) == (key.attribution, key.op)
                      and k.symptom in CLIFF_SYMPTOMS), None)
        if cliff is None and not key.op:
            cliff = _explaining(merged, merged[key])
        if cliff is not None:
            merged[cliff] += merged.pop(key)
    findings = [RunFinding(0, key.op, key.symptom, members) for key, members in merged.items()]
    findings.sort(key=lambda f: (f.severity, distance(f.smallest.magnitude)))
    return numbered(findings, rows, title)


def numbered(findings: list[RunFinding], rows: Iterable[Row],
             title: Callable[[RunFinding], str]) -> list[RunFinding]:
    """``findings`` numbered from 1 in their order, each with where it shows among the
    cells of ``rows`` and its title."""
    rows = [r for r in rows if r.role == "target"]
    cells = list(dict.fromkeys((r.target, r.path) for r in rows))
    # A failure at coremltools' defaults, which the converter overrides cured, is no
    # failure of the program judged on its path; the one of a whole conversion (no path)
    # is a cell of its own finding only.
    failing = {(r.target, r.path) for r in rows
               if r.verdict.failed and not is_cured_failure(r.verdict)}
    apart = {(r.target, r.path) for r in rows if is_cured_failure(r.verdict) and not r.path}
    for number, finding in enumerate(findings, start=1):
        finding.number = number
        own = {(g.target, g.path) for g in finding.groups}
        finding.shows = _shows(finding, [c for c in cells if c not in apart or c in own],
                               failing)
        finding.title = title(finding)
    return findings


def _explaining(merged: dict[CauseKey, list[FailureGroup]],
               unnamed: list[FailureGroup]) -> CauseKey | None:
    """The numeric cause at a named op that explains ``unnamed`` (tolerance failures
    without an op): it fails on each of their targets, from a trigger within
    :data:`EXPLAINS_WITHIN` of theirs."""
    def smallest(groups: Iterable[FailureGroup], target: str) -> float:
        return min((g.smallest.magnitude for g in groups if g.target == target),
                   default=float("inf"))

    targets = {g.target for g in unnamed}
    for key, groups in merged.items():
        if key.op and not key.attribution and key.symptom in NUMERIC_SYMPTOMS and all(
                smallest(groups, t) <= EXPLAINS_WITHIN * smallest(unnamed, t)
                for t in targets):
            return key
    return None


def _shows(finding: RunFinding, cells: Sequence[tuple[str, str]],
           failing: set[tuple[str, str]]) -> dict[str, dict[str, str]]:
    """target → path → the smallest failing input set of the finding there, else
    :data:`OTHER` where the cell fails otherwise, else pass."""
    shows: dict[str, dict[str, str]] = {}
    for target, path in cells:
        here = [g for g in finding.groups if (g.target, g.path) == (target, path)]
        smallest = min((g.smallest for g in here), default=None,
                       key=lambda m: (m.magnitude, m.label))
        shows.setdefault(target, {})[path] = smallest.label if smallest else (
            OTHER if (target, path) in failing else PASS)
    return shows

"""A campaign's findings grouped by root cause: one law, its brackets beneath it.

The campaign deduplicates failures by (signature, parameter class), which is what a
corpus case guards and what shrinking keeps apart. A reader wants the bug: one Σexp
overflow met at reductions over 6, 1 and 3 elements, or on two conversion paths and
five value families of a model, is one root cause. A root cause is a signature and the
law theory states for it — :attr:`~nebisect.search.cliff.Boundary.formula` of the
boundary each cliff was predicted by (``log(65504/n)`` for every n); each distinct
bracket is listed beneath it with the cases that show it.

A finding no boundary predicts (a family theory says nothing of, a crash) joins the one
law its signature has in the campaign; with no law, or with several (two overflows of
one kind, told apart only by theory), it is grouped by its signature alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nebisect.fuzzing.campaign import Finding
from nebisect.fuzzing.model_subject import cliff_family
from nebisect.search.cliff import Boundary


@dataclass
class Bracket:
    """The cases whose cliffs are one bracket (in one family, for a model)."""

    family: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def first(self) -> Finding:
        return self.findings[0]


@dataclass
class RootCause:
    """One bug: a subject's signature, the law its cliffs follow (None: no theory)."""

    subject: str
    signature: str
    law: Boundary | None
    findings: list[Finding] = field(default_factory=list)

    def brackets(self) -> list[Bracket]:
        """The findings with a cliff, one entry per distinct bracket, in finding order."""
        found: dict[tuple[Any, ...], Bracket] = {}
        for finding in self.findings:
            cliff = finding.cliff
            if cliff is None:
                continue
            family = family_of(finding)
            key = (family, cliff.lo, cliff.hi, cliff.ulps)
            found.setdefault(key, Bracket(family)).findings.append(finding)
        return list(found.values())

    def without_cliff(self) -> list[Finding]:
        return [f for f in self.findings if f.cliff is None]

    def to_dict(self, index: dict[int, int]) -> dict[str, Any]:
        """JSON: the law, and the findings as positions in their result's list
        (``index``: ``id(finding)`` → position)."""
        return {"subject": self.subject, "signature": self.signature,
                "law": None if self.law is None else self.law.to_dict(),
                "findings": [index[id(f)] for f in self.findings]}


def family_of(finding: Finding) -> str:
    """The family a finding's cliff was localized in: '' for an op (its first input,
    delta-replicated), the model family otherwise."""
    return "" if "program" in finding.case else cliff_family(finding.case)


def law_of(finding: Finding) -> Boundary | None:
    """The boundary that predicted the finding's cliff, if one did."""
    cliff = finding.cliff
    return None if cliff is None or cliff.predicted is None else Boundary.from_dict(
        cliff.predicted)


def root_causes(findings: list[Finding]) -> list[RootCause]:
    """``findings`` grouped by (subject, signature, law), in order of first appearance."""
    laws: dict[tuple[str, str], dict[str, Boundary]] = {}
    for finding in findings:
        law = law_of(finding)
        if law is not None:
            laws.setdefault((finding.subject, finding.signature), {}).setdefault(
                law.formula, law)
    causes: dict[tuple[str, str, str], RootCause] = {}
    for finding in findings:
        known = laws.get((finding.subject, finding.signature), {})
        law = law_of(finding)
        if law is None and len(known) == 1:
            law = next(iter(known.values()))
        elif law is not None:
            law = known[law.formula]
        key = (finding.subject, finding.signature, "" if law is None else law.formula)
        causes.setdefault(key, RootCause(finding.subject, finding.signature, law)).findings.append(
            finding)
    return list(causes.values())

"""Lint's records: a :class:`Rule` (metadata + check) and a :class:`LintFinding` (one hazard).

Below the registry (:mod:`nebisect.hazards.registry`, which builds findings of registered
rules); a rule's check reads a program view (:mod:`nebisect.hazards.graph`), which knows
nothing of rules or findings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nebisect.codec import Record

if TYPE_CHECKING:
    from nebisect.hazards.graph import ProgramView

SEVERITIES = ("error", "warning", "note")

Check = Callable[["ProgramView"], Iterable["LintFinding"]]


@dataclass(frozen=True)
class Rule:
    """A registered hazard rule (metadata plus its check function).

    Its JSON form (:meth:`to_dict`) is its metadata without the check, a function; it is
    never read back (rules come from the registry). Written by hand: the check's type
    names the lint graph, which the codec would have to import to read the fields.
    """

    id: str
    severity: str
    title: str
    rationale: str
    source: str
    fix: str | None
    remedy: str
    check: Check = field(compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "severity": self.severity, "title": self.title,
            "rationale": self.rationale, "source": self.source, "fix": self.fix,
            "remedy": self.remedy,
        }


@dataclass
class LintFinding(Record):
    """One hazard at one op: what, where, how bad, and what cures it.

    ``severity`` may differ from the rule's default (e.g. ``log(softmax)`` is an
    error in fp16 but a warning in fp32); ``details`` carries the numbers behind the
    message (reduction size, predicted boundary, proven bound) for JSON consumers.
    """

    rule_id: str
    severity: str
    message: str
    function: str
    op_name: str
    op_type: str
    fix: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"unknown severity {self.severity!r}")

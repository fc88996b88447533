"""Run the registered rules over one program and collect a :class:`LintResult`.

Separate from the package façade (:mod:`nebisect.hazards`) so that the lint child
(:mod:`nebisect.hazards.isolated`) can lint without importing the façade that calls it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from nebisect.errors import NebisectError
from nebisect.hazards.graph import ProgramView, Range
from nebisect.hazards.records import SEVERITIES, LintFinding
from nebisect.hazards.registry import registered_rules

LINT_SCHEMA_VERSION = 1
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_RANGE = re.compile(rf"^(?P<name>[^=\s]+)=(?P<lo>{_NUMBER}):(?P<hi>{_NUMBER})$")


@dataclass
class LintResult:
    """Findings of one lint run, most severe first, with the options that produced them."""

    source: str
    assume_fp16: bool
    input_ranges: dict[str, Range]
    findings: list[LintFinding] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(f.severity == "error" for f in self.findings)

    @property
    def exit_code(self) -> int:
        """1 when an error-severity hazard was found, else 0 (CI gates on this)."""
        return 1 if self.errors else 0

    def counts(self) -> dict[str, int]:
        return {s: sum(f.severity == s for f in self.findings) for s in SEVERITIES}

    def to_dict(self) -> dict[str, Any]:
        """``lint --json``'s document, written by hand rather than by the codec: it adds
        the counts and every registered rule, and names ``assume_fp16`` ``fp16``."""
        return {
            "schema_version": LINT_SCHEMA_VERSION,
            "source": self.source,
            "fp16": self.assume_fp16,
            "input_ranges": {n: [r.lo, r.hi] for n, r in sorted(self.input_ranges.items())},
            "counts": self.counts(),
            "findings": [f.to_dict() for f in self.findings],
            "rules": [rule.to_dict() for rule in registered_rules().values()],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LintResult:
        return cls(
            str(data["source"]), bool(data["fp16"]),
            {str(n): Range(float(r[0]), float(r[1])) for n, r in data["input_ranges"].items()},
            [LintFinding.from_dict(f) for f in data["findings"]],
        )


def parse_input_range(text: str) -> tuple[str, Range]:
    """``NAME=LO:HI`` → (name, Range); a malformed or empty range is a user error."""
    match = _RANGE.match(text.strip())
    if match is None:
        raise NebisectError(f"bad --input-range {text!r}: expected NAME=LO:HI, e.g. x=-15:15")
    lo, hi = float(match["lo"]), float(match["hi"])
    if lo > hi:
        raise NebisectError(f"bad --input-range {text!r}: LO {lo:g} is above HI {hi:g}")
    return match["name"], Range(lo, hi)


def lint_program(
    program: Any,
    *,
    assume_fp16: bool = False,
    input_ranges: dict[str, Range] | None = None,
    source: str = "",
) -> LintResult:
    """Run every registered rule over ``program`` (a coremltools MIL Program)."""
    ranges = dict(input_ranges or {})
    names = {n for f in program.functions.values() for n in f.inputs}
    unknown = sorted(set(ranges) - names)
    if unknown:
        raise NebisectError(
            f"--input-range names {', '.join(unknown)} not among the model's inputs "
            f"({', '.join(sorted(names)) or 'none'})"
        )
    view = ProgramView(program, assume_fp16=assume_fp16, input_ranges=ranges)
    findings = [f for rule in registered_rules().values() for f in rule.check(view)]
    findings.sort(key=lambda f: (
        SEVERITIES.index(f.severity), view.position(f.function, f.op_name), f.rule_id,
    ))
    return LintResult(source, assume_fp16, ranges, findings)

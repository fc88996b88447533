"""Static hazard scan of a Core ML ML program (``nebisect lint``).

Many Core ML failures are visible in the MIL graph before anything runs: an
unshifted ``reduce_log_sum_exp`` in fp16 (seed 000), a native ``softplus``,
``log(softmax(x))``, a data-dependent output shape (seed 003), an attention mask
sentinel that becomes −inf in fp16. Each is a registered rule
(:mod:`nebisect.lint.registry`) in a family module; ``--input-range`` adds an interval
analysis that proves an overflow for the inputs the user says they feed.

API::

    lint_program(program, *, assume_fp16=False, input_ranges=None) -> LintResult
    lint_source(source, *, assume_fp16=False, input_ranges=None) -> LintResult
        (a ``module:function`` builder is user code: it is built and linted in an
        isolated child, :mod:`nebisect.lint.builder`)
    parse_input_range("x=-15:15") -> ("x", Range(-15.0, 15.0))
    registered_rules() -> dict[str, Rule]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nebisect.case import NebisectError
from nebisect.lint.graph import ProgramView, Range
from nebisect.lint.registry import (
    SEVERITIES,
    Finding,
    Rule,
    get_rule,
    lint_rule,
    registered_rules,
)
from nebisect.timeouts import DEFAULT_TIMEOUTS

__all__ = [
    "Finding", "LintResult", "Range", "Rule", "get_rule", "lint_program", "lint_rule",
    "lint_source", "load_source", "parse_input_range", "registered_rules",
]

SCHEMA_VERSION = 1
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_RANGE = re.compile(rf"^(?P<name>[^=\s]+)=(?P<lo>{_NUMBER}):(?P<hi>{_NUMBER})$")


@dataclass
class LintResult:
    """Findings of one lint run, most severe first, with the options that produced them."""

    source: str
    assume_fp16: bool
    input_ranges: dict[str, Range]
    findings: list[Finding] = field(default_factory=list)

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
        return {
            "schema_version": SCHEMA_VERSION,
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
            [Finding.from_dict(f) for f in data["findings"]],
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


def is_builder(source: str) -> bool:
    """``module:function`` (a builder returning a MIL Program), not a path."""
    return not Path(source).exists() and ":" in source and "/" not in source


def load_source(source: str) -> Any:
    """The MIL program of an ``.mlpackage`` path (builders are loaded in a child)."""
    if Path(source).exists():
        from nebisect.mil.load import load_program

        return load_program(source)
    raise NebisectError(f"{source}: no such .mlpackage")


def lint_source(
    source: str,
    *,
    assume_fp16: bool = False,
    input_ranges: dict[str, Range] | None = None,
    timeout: float = DEFAULT_TIMEOUTS.load,
) -> LintResult:
    """Load ``source`` and lint it; a builder runs (and is linted) in an isolated child
    bounded by ``timeout``, never in this process."""
    if is_builder(source):
        from nebisect.lint.builder import lint_builder

        return lint_builder(source, assume_fp16=assume_fp16, input_ranges=input_ranges or {},
                            timeout=timeout)
    return lint_program(
        load_source(source), assume_fp16=assume_fp16, input_ranges=input_ranges, source=source
    )

"""Lint a ``module:function`` builder in an isolated child: user code never runs here.

A builder is the user's Python: importing it or calling it may raise, exit, crash or
hang. The child builds the program and lints it; the parent gets the
:class:`~nebisect.lint.LintResult` back as a JSON record, or one line saying what went
wrong (:mod:`nebisect.sources.loading`).
"""

from __future__ import annotations

from typing import Any

from nebisect.case import REFERENCE_TARGET
from nebisect.errors import NebisectError
from nebisect.lint.engine import LintResult, lint_program
from nebisect.lint.graph import Range
from nebisect.sources.loading import ChildSubject, describe_in_child, first_line, record_verdict
from nebisect.targets import get_target

BUILDER_SUBJECT = ChildSubject("the builder", "returning a program")


def lint_builder_job(payload: dict[str, Any]) -> Any:
    """Child side: build the program, lint it, return the result as a record."""

    def build() -> dict[str, Any]:
        from nebisect.sources.artifact import Artifact

        try:
            program = Artifact("builder", payload["source"]).program
        except NebisectError:
            raise
        except Exception as exc:
            raise NebisectError(f"building the program raised {type(exc).__name__}: "
                                f"{first_line(str(exc))}") from None
        ranges = {name: Range(lo, hi) for name, (lo, hi) in payload["input_ranges"].items()}
        return lint_program(program, assume_fp16=payload["fp16"], input_ranges=ranges,
                            source=payload["source"]).to_dict()

    return record_verdict(build)


def lint_builder(source: str, *, assume_fp16: bool, input_ranges: dict[str, Range],
                 timeout: float) -> LintResult:
    """Parent side: the child's lint result, or a one-line NebisectError."""
    record = describe_in_child(
        "nebisect.lint.builder:lint_builder_job",
        {"source": source, "fp16": assume_fp16,
         "input_ranges": {n: [r.lo, r.hi] for n, r in input_ranges.items()}},
        label=source, subject=BUILDER_SUBJECT, timeout=timeout,
        # Builders use coremltools' MIL builder, as the simulator's cases do: the same
        # warm template (torch kept out) serves them.
        preload=tuple(get_target(REFERENCE_TARGET).preload),
    )
    return LintResult.from_dict(record)

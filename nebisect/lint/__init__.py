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

from pathlib import Path
from typing import Any

from nebisect.errors import NebisectError
from nebisect.isolation.timeouts import DEFAULT_TIMEOUTS
from nebisect.lint.engine import LintResult, lint_program, parse_input_range
from nebisect.lint.graph import Range
from nebisect.lint.records import LintFinding, Rule
from nebisect.lint.registry import get_rule, lint_rule, registered_rules

__all__ = [
    "LintFinding", "LintResult", "Range", "Rule", "get_rule", "lint_program", "lint_rule",
    "lint_source", "load_source", "parse_input_range", "registered_rules",
]


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

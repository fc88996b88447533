"""Static hazard scan of a Core ML ML program (``nebisect lint``).

Many Core ML failures are visible in the MIL graph before anything runs: an
unshifted ``reduce_log_sum_exp`` in fp16 (seed 000), a native ``softplus``,
``log(softmax(x))``, a data-dependent output shape (seed 003), an attention mask
sentinel that becomes −inf in fp16. Each is a registered rule
(:mod:`nebisect.hazards.registry`) in a family module; ``--input-range`` adds an interval
analysis that proves an overflow for the inputs the user says they feed.

API::

    lint_program(program, *, assume_fp16=False, input_ranges=None) -> LintResult
    lint_source(source, *, isolator, assume_fp16=False, input_ranges=None,
                timeouts=Timeouts(), paths=PATHS, setup=()) -> LintResult
        (the program is loaded and linted in an isolated child,
        :mod:`nebisect.hazards.isolated`: a ``module:function`` builder is user code, and
        reading a package computes some of its ops; a torch ``file.py:factory`` is
        converted in one on ``paths``, :mod:`nebisect.hazards.torch`)
    parse_input_range("x=-15:15") -> ("x", Range(-15.0, 15.0))
    registered_rules() -> dict[str, Rule]
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nebisect.case import SourceRef
from nebisect.errors import NebisectError
from nebisect.hazards.engine import LintResult, lint_program, parse_input_range
from nebisect.hazards.graph import Range
from nebisect.hazards.records import LintFinding, Rule
from nebisect.hazards.registry import get_rule, lint_rule, registered_rules
from nebisect.isolation.timeouts import DEFAULT_TIMEOUTS, Timeouts
from nebisect.sources.convert import PATHS
from nebisect.sources.resolve import is_torch_location

if TYPE_CHECKING:
    from nebisect.isolate import Isolator

__all__ = [
    "LintFinding", "LintResult", "Range", "Rule", "get_rule", "lint_program", "lint_rule",
    "lint_source", "load_source", "parse_input_range", "registered_rules",
]


def is_builder(source: str) -> bool:
    """``module:function`` (a builder returning a MIL Program), not a path nor a torch
    source."""
    return (not Path(source).exists() and ":" in source and "/" not in source
            and not is_torch_location(source))


def load_source(source: str) -> Any:
    """The MIL program of an ``.mlpackage`` path, read in this process (``lint_source``
    reads it in a child; builders are only ever loaded in one)."""
    if Path(source).exists():
        from nebisect.isolation import memory
        from nebisect.mil.load import load_program

        return load_program(source, memory_budget=memory.budget())
    raise NebisectError(f"{source}: no such .mlpackage")


def lint_source(
    source: str,
    *,
    isolator: Isolator,
    assume_fp16: bool = False,
    input_ranges: dict[str, Range] | None = None,
    timeouts: Timeouts = DEFAULT_TIMEOUTS,
    paths: tuple[str, ...] = PATHS,
    setup: tuple[str, ...] = (),
    function: str = "",
) -> LintResult:
    """Load ``source`` (of a multifunction package: ``function``, else its default) and
    lint it, in isolated children of the caller's ``isolator`` bounded by ``timeouts.load``:
    a builder is built there, a package read there, a torch source described and
    converted (on ``paths``, after ``setup``) there: neither user code nor the model's
    loader runs here."""
    from nebisect.hazards.isolated import lint_isolated

    ranges = input_ranges or {}
    if function and (is_torch_location(source) or is_builder(source)):
        raise NebisectError(f"{source}: --function {function} names a function of a "
                            "multifunction .mlpackage")
    if is_torch_location(source):
        from nebisect.hazards.torch import lint_torch

        return lint_torch(source, assume_fp16=assume_fp16, input_ranges=ranges,
                          timeouts=timeouts, paths=paths, isolator=isolator, setup=setup)
    if is_builder(source):
        model = SourceRef("builder", source)
    elif Path(source).exists():
        model = SourceRef("mlpackage", os.path.abspath(source), function)
    else:
        raise NebisectError(f"{source}: no such .mlpackage")
    return lint_isolated(model, source=source, assume_fp16=assume_fp16,
                         input_ranges=ranges, timeout=timeouts.load, isolator=isolator)

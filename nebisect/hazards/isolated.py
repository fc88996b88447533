"""Lint a program in an isolated child: nothing of the model is built or read here.

A builder (``module:function``) is the user's Python: importing or calling it may
raise, exit, crash or hang. A package is read by coremltools' loader, which computes
some ops while it builds them (a ``fill`` of constant shape allocates its whole
tensor): it is read under the child's memory limit, after the size check of
:mod:`nebisect.mil.sizes`. The child loads the program and lints it; the parent gets
the :class:`~nebisect.hazards.LintResult` back as a JSON record, or one line saying what
went wrong (:mod:`nebisect.sources.loading`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nebisect.case import SourceRef
from nebisect.errors import NebisectError
from nebisect.hazards.engine import LintResult, lint_program
from nebisect.hazards.graph import Range
from nebisect.isolate import Needs
from nebisect.sources.loading import (
    ChildSubject,
    describe_in_child,
    first_line,
    record_verdict,
    unprefixed,
)
from nebisect.targets.registry import get_target
from nebisect.targets.spec import REFERENCE_TARGET

if TYPE_CHECKING:
    from nebisect.isolate import Isolator

SUBJECTS = {
    "builder": ChildSubject("the builder", "returning a program"),
    "mlpackage": ChildSubject("reading the package", "its findings"),
}


@dataclass(frozen=True)
class LintArguments:
    """The arguments of :func:`lint_job`: the model (a builder or a package, of its
    function), the source as the user named it, and lint's options."""

    model: SourceRef
    source: str
    fp16: bool
    input_ranges: dict[str, tuple[float, float]]


def lint_job(arguments: LintArguments) -> Any:
    """Child side: load (or build) the program, lint it, return the result as a record."""

    def build() -> dict[str, Any]:
        from nebisect.sources.artifact import Artifact

        model = arguments.model
        location = model.location
        try:
            program = Artifact.of(model).program
        except NebisectError as exc:
            raise NebisectError(unprefixed(str(exc), location)) from None
        except Exception as exc:
            if not model.is_builder:
                raise
            raise NebisectError(f"building the program raised {type(exc).__name__}: "
                                f"{first_line(str(exc))}") from None
        ranges = {name: Range(lo, hi) for name, (lo, hi) in arguments.input_ranges.items()}
        return lint_program(program, assume_fp16=arguments.fp16, input_ranges=ranges,
                            source=arguments.source).to_dict()

    return record_verdict(build)


def lint_isolated(model: SourceRef, *, source: str, assume_fp16: bool,
                  input_ranges: dict[str, Range], timeout: float,
                  needs: Needs | None = None, isolator: Isolator | None = None,
                  ) -> LintResult:
    """Parent side: the lint result of the ``builder`` or ``mlpackage`` ``model`` names
    (of its function, for a multifunction package; ``source``: as the user named it, for
    the result and the error line), or a one-line NebisectError. ``needs``: what its
    child imports (default: the simulator's, coremltools without torch)."""
    record = describe_in_child(
        "nebisect.hazards.isolated:lint_job",
        LintArguments(model, source, assume_fp16,
                      {n: (r.lo, r.hi) for n, r in input_ranges.items()}),
        label=source, subject=SUBJECTS[model.kind], timeout=timeout,
        # Builders and packages are read with coremltools, as the simulator's cases
        # read them: the same warm template (torch kept out) serves them.
        needs=needs or get_target(REFERENCE_TARGET).needs, isolator=isolator,
    )
    return LintResult.from_dict(record)

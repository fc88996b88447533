"""What a reduction is handed, what it hands back, and the protocol it implements.

Kept apart from :mod:`nebisect.minimize.bisector` so that the reductions
(:mod:`nebisect.minimize.reductions`) and the bisector that runs them both depend on this
module and not on each other: a reduction never sees the bisector.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from nebisect.search.ddmin import Budget, Evaluator, Reduction

if TYPE_CHECKING:
    from nebisect.executors.runner import Runner
    from nebisect.isolate import Isolator
    from nebisect.minimize.candidates import CandidateSpace
    from nebisect.minimize.options import BisectOptions, SearchProgress
    from nebisect.sources.resolve import Source
    from nebisect.verdict import Verdict


@dataclass(frozen=True)
class ReductionContext:
    """All a reduction is given — it never sees the bisector.

    ``label`` is the source as the user typed it (for messages); ``runner`` the command's
    (its isolator runs the reduction's children); ``setup`` the converter
    fixes' ``module:function`` setups (``--fix``); ``workdir`` is scratch space removed
    afterwards, ``out`` where the minimized artifact and the repro go (the bisector adds
    ``summary.json``); ``progress`` takes phases and isolated-run counts for the live line.
    The search's test, cache, budget and re-checks come from :meth:`evaluator`.
    """

    label: str
    source: Source
    options: BisectOptions
    runner: Runner
    workdir: Path
    out: Path
    setup: tuple[str, ...]
    progress: SearchProgress
    cache: MutableMapping[str, str | None] = field(default_factory=dict)

    @property
    def isolator(self) -> Isolator:
        return self.runner.isolator

    def evaluator(self, space: CandidateSpace, signature: str) -> Evaluator[str]:
        """The search's evaluator over ``space``: cache, budget, re-checks, live line."""
        self.progress.space = space
        self.progress.expected.add(signature)
        budget = Budget(self.options.max_evals, self.options.timeout)
        return Evaluator(space.test, key=space.key, cache=self.cache, stop=budget,
                         confirm=self.options.confirmations(signature),
                         observer=self.progress.observe)


@dataclass
class ReductionOutput:
    """What a reduction hands back: the original verdict, the search's result, the size
    before, the kept units' types, a note, and the intermediate checks it spent."""

    original: Verdict
    reduction: Reduction[str]
    before: int
    kept_types: list[str]
    message: str = ""
    divergence_checks: int = 0


class GraphReduction(Protocol):
    """A reduction the bisector can be handed (:mod:`nebisect.minimize.reductions`)."""

    unit: str  # what it counts on the live line: "ops", "nodes"

    def run(self, context: ReductionContext) -> ReductionOutput: ...

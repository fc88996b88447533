"""``nebisect bisect``: reduce a failing model to the smallest piece that fails the same way.

What seed 003's reporter did by hand over days, mechanically:

1. **Which graph.** A failure at the ``predict`` stage lives in the ML program: an
   ``.mlpackage`` is reduced op by op (a torch source is converted first, in isolation,
   with the converter fixes named by ``--fix``). A failure at the ``convert`` stage
   lives in the torch graph: the module is exported — in a child, like all user code
   (:mod:`nebisect.minimize.graphs.fx_jobs`) — and reduced node by node, whole submodules first
   (:mod:`nebisect.minimize.graphs.fx`); ``--graph fx`` does the same for a
   torch source's prediction failure, each candidate converted and predicted against
   itself in float64 (a converter that emits different math shows there).
2. **The original.** The model runs once in isolation on the target, on the given
   inputs — without them, on the first trigger ``run``'s discovery finds on that target
   (:mod:`nebisect.minimize.trigger`); the signature of that verdict is what every
   candidate must reproduce on the same target — a candidate that passes, or fails
   another way, is rejected.
3. **Search** (:mod:`nebisect.minimize.reductions`): a reduction object, handed to the
   :class:`Bisector` and given a :class:`~nebisect.minimize.context.ReductionContext`. A
   numeric mismatch in an ML program is localized by first-divergence over the
   intermediates of that one run (target vs ``sim:fp64``), then confirmed by running the
   diverging op alone, fed the reference values; errors, crashes, and localizations that
   do not reproduce in isolation fall back to ddmin over ops; torch graphs use
   hierarchical ddmin.
4. **Output.** The minimized artifact, ``inputs.npz``, a standalone ``repro.py``
   (:mod:`nebisect.minimize.repro.script`) and ``summary.json``.

Every run of a candidate is cached by the content hash of the candidate's bytes, and
the evaluation budget / deadline / Ctrl-C stop the search with the best result so far.
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from nebisect.codec import Record
from nebisect.errors import NebisectError
from nebisect.executors.runner import Runner
from nebisect.files import merge_into, staged
from nebisect.minimize.context import GraphReduction, ReductionContext, ReductionOutput
from nebisect.minimize.options import BisectOptions, Progress, SearchProgress
from nebisect.sources.resolve import Source, resolve_source


@dataclass
class BisectResult(Record):
    """What ``summary.json`` records. ``evaluations`` counts every isolated run
    (conversions, the original, a recording, candidates and their re-checks);
    ``candidate_evaluations`` the predicate calls of the search; ``divergence_checks``
    the comparisons of recorded intermediates that first-divergence spent instead."""

    source: str
    target: str
    stage: str
    graph: str
    unit: str
    signature: str
    reduced_signature: str
    units_before: int
    units_after: int
    kept: list[str]
    kept_types: list[str]
    strategy: str
    complete: bool
    stopped: str | None
    evaluations: int
    candidate_evaluations: int
    cache_hits: int
    confirmations: int
    flaky: int
    seconds: float
    divergence_checks: int = 0
    message: str = ""
    files: list[str] = field(default_factory=list)
    #: the trigger the reduction started from when no inputs were given (one line)
    trigger: str = ""

    @classmethod
    def not_started(cls, source: str, target: str, why: str) -> BisectResult:
        """A bisection stopped (``why``) before its reduction began: nothing reduced,
        nothing written."""
        return cls(source, target, stage="", graph="", unit="", signature="",
                   reduced_signature="", units_before=0, units_after=0, kept=[],
                   kept_types=[], strategy="", complete=False, stopped=why, evaluations=0,
                   candidate_evaluations=0, cache_hits=0, confirmations=0, flaky=0,
                   seconds=0.0)


def default_reduction(options: BisectOptions) -> GraphReduction:
    """The torch graph's nodes for ``--graph fx`` (and conversions), else the ML program's ops."""
    from nebisect.minimize.reductions import ProgramReduction, TorchGraphReduction

    return TorchGraphReduction() if options.reduced_graph == "fx" else ProgramReduction()


class Bisector:
    """One reduction: resolves the source, finds a trigger when it was given no inputs,
    hands the reduction its context, writes the summary."""

    def __init__(self, source: str, options: BisectOptions, out: Path,
                 runner: Runner, progress: Progress | None = None,
                 reduction: GraphReduction | None = None) -> None:
        self.text = source
        self.options = options
        self.out = out
        self.runner = runner
        self.isolator = runner.isolator
        self.started = time.monotonic()
        self.reduction = reduction
        self.search_progress = SearchProgress(progress, "", options.max_evals)

    def run(self) -> BisectResult:
        source = resolve_source(self.text, function=self.options.function,
                                timeout=self.options.timeouts.load, isolator=self.isolator)
        if self.options.reduced_graph == "fx" and not source.ref.is_torch:
            raise NebisectError(f"--stage {self.options.stage} --graph fx needs a torch source "
                                f"(path/file.py:factory); {self.text} is an {source.kind}")
        if self.options.fixes and not source.ref.is_torch:
            raise NebisectError("--fix applies to the conversion of a torch source; "
                                f"{self.text} is an {source.kind}")
        setup = self.setup()
        with tempfile.TemporaryDirectory(prefix="nebisect-bisect-") as tmp:
            options, trigger = self.options, ""
            if not options.inputs and options.stage == "predict":
                from nebisect.minimize.trigger import find_trigger

                found = find_trigger(self.text, source, options, setup, Path(tmp) / "trigger",
                                     self.runner, self.search_progress)
                options, trigger = found.applied(options), found.line
            reduction = self.reduction or default_reduction(options)
            self.search_progress.line.unit = reduction.unit
            context = ReductionContext(self.text, source, options, self.runner,
                                       Path(tmp), self.out, setup, self.search_progress)
            output = reduction.run(context)
        result = self.result(source, options, output, trigger)
        (self.out / "summary.json").write_text(json.dumps(result.to_dict(), indent=2) + "\n")
        return result

    def setup(self) -> tuple[str, ...]:
        """``module:function`` setups of the converter fixes named by ``--fix``."""
        from nebisect.fixes import resolve_fixes
        from nebisect.fixes.base import ConverterFix

        fixes = resolve_fixes(self.options.fixes) if self.options.fixes else []
        wrong = [f.name for f in fixes if not isinstance(f, ConverterFix)]
        if wrong:
            raise NebisectError(f"--fix {', '.join(wrong)}: only converter fixes apply to "
                                "the conversion of a torch source")
        return tuple(f.setup for f in fixes if isinstance(f, ConverterFix))

    def result(self, source: Source, options: BisectOptions, output: ReductionOutput,
               trigger: str) -> BisectResult:
        original, reduction, before = output.original, output.reduction, output.before
        stats = reduction.stats
        return BisectResult(
            source=source.location, target=str(options.target), stage=options.stage,
            graph=options.reduced_graph, unit=self.search_progress.line.unit,
            signature=original.signature, reduced_signature=reduction.signature,
            units_before=before, units_after=len(reduction.units), kept=list(reduction.units),
            kept_types=output.kept_types, strategy=reduction.strategy,
            complete=reduction.complete,
            stopped=reduction.stopped, evaluations=self.search_progress.runs,
            candidate_evaluations=stats.evaluations, cache_hits=stats.cache_hits,
            confirmations=stats.confirmations, flaky=stats.flaky,
            seconds=round(time.monotonic() - self.started, 3), message=output.message,
            divergence_checks=output.divergence_checks,
            files=[*sorted(p.name for p in self.out.iterdir() if p.name != "summary.json"),
                   "summary.json"],
            trigger=trigger,
        )


def bisect_source(source: str, options: BisectOptions, out: Path, runner: Runner, *,
                  progress: Progress | None = None,
                  reduction: GraphReduction | None = None) -> BisectResult:
    """Reduce ``source``'s failure on ``options.target`` in the children of ``runner``;
    write ``out``; return the summary.

    The output is built in a directory of its own and its files are moved into ``out``
    when all are written (:func:`nebisect.files.merge_into`): ``out`` never holds half a
    result, and the summary lists exactly the files this run wrote.
    """
    with staged(out, merge_into) as written:
        written.mkdir()
        return Bisector(source, options, written, runner, progress, reduction).run()

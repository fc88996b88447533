"""``nebisect bisect``: reduce a failing model to the smallest piece that fails the same way.

What seed 003's reporter did by hand over days, mechanically:

1. **Which graph.** A failure at the ``predict`` stage lives in the ML program: an
   ``.mlpackage`` is reduced op by op (a torch source is converted first, in isolation,
   with the converter fixes named by ``--fix``). A failure at the ``convert`` stage
   lives in the torch graph: the module is exported and reduced node by node, whole
   submodules first (:mod:`nebisect.graphs.fx`).
2. **The original.** The model runs once in isolation on the target; the signature of
   that verdict is what every candidate must reproduce on the same target — a
   candidate that passes, or fails another way, is rejected.
3. **Search.** A numeric mismatch is localized by first-divergence over the
   intermediates of that one run (target vs ``sim:fp64``), then confirmed by running
   the diverging op alone, fed the reference values (:func:`nebisect.bisect.localize`;
   the signature becomes the mismatch kind where the divergence enters). Errors,
   crashes, and localizations that do not reproduce in isolation fall back to ddmin
   over ops with inputs cut from a ``sim:fp64`` recording; torch graphs use
   hierarchical ddmin.
4. **Output.** The minimized artifact, ``inputs.npz``, a standalone ``repro.py``
   (:mod:`nebisect.repro`) and ``summary.json``.

Every run of a candidate is cached by the content hash of the candidate's bytes, and
the evaluation budget / deadline / Ctrl-C stop the search with the best result so far.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.bisect import (
    Budget,
    Evaluation,
    Evaluator,
    Reduction,
    Stats,
    ddmin,
    hierarchical_ddmin,
    localize,
)
from nebisect.candidates import REFERENCE, FxCandidates, MilCandidates
from nebisect.case import Case, NebisectError, load_npz, parse_target, save_npz, sha256_path
from nebisect.isolate import Isolator
from nebisect.runner import evaluate, split_arrays
from nebisect.source import Source, resolve_source
from nebisect.verdict import Verdict, compare, mismatch_signature

STAGES = ("predict", "convert")
DEFAULT_LENGTH = 8


@dataclass
class BisectOptions:
    """How to reduce: the target and stage of the failure, inputs, budget."""

    target: str
    stage: str = "predict"
    inputs: str = ""
    length: int = DEFAULT_LENGTH
    max_evals: int | None = None
    timeout: float | None = None
    case_timeout: float = 600.0
    fixes: tuple[str, ...] = ()
    confirm: int | None = None

    def confirmations(self, signature: str) -> int:
        """Re-checks of each accepted candidate: none where the verdict is deterministic
        (the simulator, or a conversion, failing by error or mismatch), one otherwise —
        a device, a crash, a timeout can be flaky."""
        if self.confirm is not None:
            return self.confirm
        deterministic = (self.stage == "convert" or self.target.startswith("sim:")) and (
            signature.startswith(("error:", "mismatch:")))
        return 0 if deterministic else 1

    def __post_init__(self) -> None:
        parse_target(self.target)
        if self.stage not in STAGES:
            raise NebisectError(f"unknown stage {self.stage!r}: one of {', '.join(STAGES)}")
        if self.max_evals is not None and self.max_evals < 1:
            raise NebisectError("--max-evals must be at least 1")
        if self.timeout is not None and self.timeout <= 0:
            raise NebisectError("--timeout must be positive")


@dataclass
class ProgressLine:
    """The live line: "1 000 ops → 3 ops, 21 evaluations" (+ what is running now)."""

    unit: str
    before: int
    best: int
    evaluations: int
    max_evals: int | None = None
    phase: str = ""

    def text(self) -> str:
        line = (f"{thousands(self.before)} {self.unit} → {thousands(self.best)} {self.unit}, "
                f"{self.evaluations} evaluations")
        return f"{line} — {self.phase}" if self.phase else line


Progress = Callable[[ProgressLine], None]


def thousands(n: int) -> str:
    return f"{n:,}".replace(",", " ")


@dataclass
class BisectResult:
    """What ``summary.json`` records."""

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Tracker:
    """Feeds the live line from the evaluator's observer and the setup runs."""

    def __init__(self, progress: Progress | None, unit: str, before: int,
                 max_evals: int | None) -> None:
        self.progress = progress
        self.line = ProgressLine(unit, before, before, 0, max_evals)
        self.expected: set[str] = set()
        self.setup_runs = 0

    def phase(self, text: str) -> None:
        self.line.phase = text
        self._emit()

    def ran(self) -> None:
        """One isolated run outside the search (the original, a recording)."""
        self.setup_runs += 1
        self.line.evaluations += 1
        self._emit()

    def observe(self, evaluation: Evaluation, stats: Stats) -> None:
        if evaluation.signature in self.expected:
            self.line.best = min(self.line.best, evaluation.size)
        self.line.evaluations = self.setup_runs + stats.evaluations
        self._emit()

    def _emit(self) -> None:
        if self.progress is not None:
            self.progress(self.line)


class Bisector:
    """One reduction: resolves the source, runs the search, writes the output."""

    def __init__(self, source: str, options: BisectOptions, out: Path,
                 isolator: Isolator, progress: Progress | None = None) -> None:
        self.text = source
        self.options = options
        self.out = out
        self.isolator = isolator
        self.progress = progress
        self.started = time.monotonic()
        self.runs = 0

    def run(self) -> BisectResult:
        source = resolve_source(self.text)
        if self.options.stage == "convert" and source.kind != "torch":
            raise NebisectError("--stage convert needs a torch source (path/file.py:factory); "
                                f"{self.text} is an {source.kind}")
        if self.options.fixes and source.kind != "torch":
            raise NebisectError("--fix applies to the conversion of a torch source; "
                                f"{self.text} is an {source.kind}")
        self.out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="nebisect-bisect-") as tmp:
            workdir = Path(tmp)
            if self.options.stage == "convert":
                result = self._reduce_conversion(source, workdir)
            else:
                result = self._reduce_program(source, workdir)
        (self.out / "summary.json").write_text(json.dumps(result.to_dict(), indent=2) + "\n")
        return result

    # ------------------------------------------------------------------ shared pieces
    def tracker(self, unit: str, before: int) -> _Tracker:
        return _Tracker(self.progress, unit, before, self.options.max_evals)

    def evaluator(self, space: Any, tracker: _Tracker, signature: str) -> Evaluator[str]:
        budget = Budget(self.options.max_evals, self.options.timeout)
        return Evaluator(space.test, key=space.key, cache={}, stop=budget,
                         confirm=self.options.confirmations(signature),
                         observer=tracker.observe)

    def result(self, source: Source, graph: str, unit: str, original: Verdict,
               reduction: Reduction[str], before: int, kept_types: list[str],
               space_runs: int, message: str = "") -> BisectResult:
        stats = reduction.stats
        return BisectResult(
            source=source.location, target=self.options.target, stage=self.options.stage,
            graph=graph, unit=unit, signature=original.signature,
            reduced_signature=reduction.signature, units_before=before,
            units_after=len(reduction.units), kept=list(reduction.units), kept_types=kept_types,
            strategy=reduction.strategy, complete=reduction.complete, stopped=reduction.stopped,
            evaluations=self.runs + space_runs, candidate_evaluations=stats.evaluations,
            cache_hits=stats.cache_hits, confirmations=stats.confirmations, flaky=stats.flaky,
            seconds=round(time.monotonic() - self.started, 3), message=message,
            files=[*sorted(p.name for p in self.out.iterdir() if p.name != "summary.json"),
                   "summary.json"],
        )

    # ------------------------------------------------------------------ MIL programs
    def _reduce_program(self, source: Source, workdir: Path) -> BisectResult:
        from nebisect.graphs.mil import MilGraph
        from nebisect.mil.load import load_program

        package = self._package(source, workdir)
        inputs_path = self._inputs(package, workdir)
        graph = MilGraph(load_program(package))
        tracker = self.tracker("ops", len(graph.units))
        tracker.phase("running the original")
        original, arrays = self._evaluate(package, inputs_path, self.options.target,
                                          REFERENCE, tracker)
        if not original.failed:
            raise NebisectError(
                f"{self.text} does not fail on {self.options.target} at the predict stage "
                f"(verdict {original.status}{': ' + original.message if original.message else ''})"
                "; nothing to bisect"
            )
        inputs = load_npz(inputs_path)
        target_mid, reference_mid = split_arrays(arrays, "mid:"), split_arrays(arrays, "refmid:")
        if not reference_mid:
            tracker.phase(f"recording intermediates on {REFERENCE}")
            recording, recorded_arrays = self._evaluate(package, inputs_path, REFERENCE, None,
                                                        tracker)
            if recording.failed:
                raise NebisectError(f"{REFERENCE} cannot run {self.text} to record the values "
                                    f"a cut is fed with: {recording.message}")
            reference_mid = split_arrays(recorded_arrays, "mid:")
        recorded = {**inputs, **reference_mid}
        space = MilCandidates(graph, recorded, self.options.target, workdir, self.isolator,
                              self.options.case_timeout)
        evaluator = self.evaluator(space, tracker, original.signature)
        tracker.expected.add(original.signature)
        reduction, checks = None, 0
        if original.status == "mismatch" and target_mid:
            tracker.phase("first divergence")
            precision = parse_target(self.options.target).precision
            found = localize(graph.dag, _divergence(target_mid, reference_mid, precision),
                             evaluator)
            if found.signature:
                tracker.expected.add(found.signature)
            reduction, checks = found.reduction, found.checks
        if reduction is None and evaluator.stats.stopped:
            reduction = Reduction(list(graph.units), original.signature, evaluator.stats,
                                  False, "none")
        elif reduction is None:
            tracker.phase("ddmin over ops")
            reduction = ddmin(graph.units, evaluator, original.signature)
        tracker.phase("writing the repro")
        plan = space.plan(reduction.units)
        self._write_program(plan, reduction, source, len(graph.units))
        kept_types = [graph.op_types[u] for u in reduction.units]
        result = self.result(source, "mil", "ops", original, reduction, len(graph.units),
                             kept_types, space.runs, original.message)
        result.divergence_checks = checks
        return result

    def _setup(self) -> tuple[str, ...]:
        """``module:function`` setups of the converter fixes named by ``--fix``."""
        from nebisect.fixes import resolve_fixes
        from nebisect.fixes.base import ConverterFix

        fixes = resolve_fixes(self.options.fixes) if self.options.fixes else []
        wrong = [f.name for f in fixes if not isinstance(f, ConverterFix)]
        if wrong:
            raise NebisectError(f"--fix {', '.join(wrong)}: only converter fixes apply to "
                                "the conversion of a torch source")
        return tuple(f.setup for f in fixes if isinstance(f, ConverterFix))

    # ------------------------------------------------------------------ torch graphs
    def _reduce_conversion(self, source: Source, workdir: Path) -> BisectResult:
        from nebisect.convert import convert_isolated
        from nebisect.graphs.fx import FxGraph
        from nebisect.repro import write_torch_repro
        from nebisect.torchsource import load_torch_source

        precision = parse_target(self.options.target).precision
        setup = self._setup()
        tracker = self.tracker("nodes", 0)
        tracker.phase("converting the original")
        self.runs += 1
        _, original = convert_isolated(source, precision, workdir, self.isolator, setup=setup,
                                       timeout=self.options.case_timeout)
        tracker.ran()
        if not original.failed:
            raise NebisectError(f"{self.text} converts on both torch paths; nothing to bisect "
                                "at --stage convert")
        tracker.phase("exporting and recording the graph")
        graph = FxGraph(load_torch_source(source.location))
        tracker.line.before = tracker.line.best = len(graph.units)
        space = FxCandidates(graph, precision, setup, workdir / "candidates", self.isolator,
                             self.options.case_timeout)
        evaluator = self.evaluator(space, tracker, original.signature)
        tracker.expected.add(original.signature)
        tracker.phase("hierarchical ddmin: submodules, then nodes")
        reduction = hierarchical_ddmin(graph.units, evaluator, graph.levels, original.signature)
        note = "" if tracker.line.best < len(graph.units) else (
            "no smaller candidate reproduced the signature (the exported graph may convert "
            "differently from the module)")
        tracker.phase("writing the repro")
        candidate = space.candidate(reduction.units)
        header = (f"Minimized by nebisect bisect from {source.location}: "
                  f"{len(reduction.units)} of {len(graph.units)} graph nodes still fail to "
                  "convert the same way.")
        write_torch_repro(self.out, candidate, signature=original.signature,
                          message=original.message, precision=precision, setup=setup,
                          header=header)
        kept_types = [str(graph.nodes[u].target) for u in reduction.units]
        return self.result(source, "fx", "nodes", original, reduction, len(graph.units),
                           kept_types, space.runs, note or original.message)

    def _package(self, source: Source, workdir: Path) -> Path:
        """The ML program to reduce: the source itself, or its conversion."""
        if source.kind == "mlpackage":
            return Path(source.location)
        from nebisect.convert import convert_isolated

        self.runs += 1
        package, verdict = convert_isolated(
            source, parse_target(self.options.target).precision, workdir, self.isolator,
            setup=self._setup(), timeout=self.options.case_timeout,
        )
        if package is None:
            raise NebisectError(
                f"{self.text} does not convert ({verdict.signature}); bisect the conversion "
                "with --stage convert, or convert it with --fix converter-compat"
            )
        return package

    def _inputs(self, package: Path, workdir: Path) -> Path:
        from nebisect.inputs import check, describe_package, generate

        described = describe_package(package)
        if self.options.inputs:
            arrays = load_npz(self.options.inputs)
            check(described, arrays)
            return Path(self.options.inputs)
        path = workdir / "inputs.npz"
        save_npz(path, generate(described, self.options.length))
        return path

    def _evaluate(self, package: Path, inputs_path: Path, target: str, reference: str | None,
                  tracker: _Tracker) -> tuple[Verdict, dict[str, np.ndarray]]:
        case = Case(str(package), "mlpackage", target, inputs_path=str(inputs_path),
                    model_sha256=sha256_path(package), options={"intermediates": True})
        self.runs += 1
        outcome = evaluate(case, reference=reference, isolator=self.isolator,
                           timeout=self.options.case_timeout)
        tracker.ran()
        if outcome.verdict.status == "skipped":
            raise NebisectError(f"{target} cannot run here: {outcome.verdict.message}")
        return outcome.verdict, outcome.arrays

    def _write_program(self, plan: Any, reduction: Reduction[str], source: Source,
                       before: int) -> None:
        from nebisect.graphs.mil import build
        from nebisect.mil.load import save_program
        from nebisect.repro import write_mil_repro

        save_program(build(plan), self.out / "minimized.mlpackage")
        header = (f"Minimized by nebisect bisect from {source.location}: {len(reduction.units)} "
                  f"of {before} ops still fail on {self.options.target}.")
        write_mil_repro(self.out, plan, signature=reduction.signature,
                        target=self.options.target, header=header)


def _divergence(target: dict[str, np.ndarray], reference: dict[str, np.ndarray],
                precision: str) -> Callable[[str], str | None]:
    """One value of the target run against the reference run: its mismatch signature."""

    def check(name: str) -> str | None:
        if name not in target or name not in reference:
            return None
        compared = compare(name, reference[name], target[name], precision)
        return None if compared.passed else mismatch_signature(compared.kind)

    return check


def bisect_source(source: str, options: BisectOptions, out: Path, *,
                  progress: Progress | None = None,
                  isolator: Isolator | None = None) -> BisectResult:
    """Reduce ``source``'s failure on ``options.target``; write ``out``; return the summary."""
    if isolator is not None:
        return Bisector(source, options, out, isolator, progress).run()
    with Isolator() as own:
        return Bisector(source, options, out, own, progress).run()

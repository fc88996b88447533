"""The two reductions ``nebisect bisect`` runs (see :mod:`nebisect.minimize.bisector`).

Each is an object the bisector is handed and calls with a
:class:`~nebisect.minimize.context.ReductionContext` — the source, the options, the
isolator, the evaluator factory (test, cache, budget), the progress sink, where to
write — and nothing else: a reduction never reaches into the bisector, so another one
(a new graph kind, a test's stub) plugs in the same way, as picire's ``DD`` is handed
its splitter and cache.

* :class:`ProgramReduction` — an ML program's ops, cut in this process once a child
  has read the program within the memory limit (reading it computes some ops). A
  mismatch is localized by first-divergence over the intermediates of the original run
  (target vs ``sim:fp64``) and confirmed by the diverging op alone, fed the reference
  values; the signature then is the mismatch kind *where the divergence enters* (a
  collapse at the lse, not the tolerance miss it causes downstream). Everything else —
  errors, crashes, a divergence that does not reproduce in isolation — is ddmin over
  ops, cut inputs fed from a ``sim:fp64`` recording.
* :class:`TorchGraphReduction` — an exported torch graph's nodes, by hierarchical ddmin:
  whole submodules first, then single nodes; each candidate is converted (and, for a
  prediction failure, predicted against itself in float64) in isolation.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nebisect.arrays import load_npz, save_npz, sha256_path
from nebisect.case import PACKAGE, Case, CaseOptions, SourceRef
from nebisect.errors import NebisectError
from nebisect.evaluate.judge import evaluate, split_arrays
from nebisect.minimize.candidates import REFERENCE, FxCandidates, MilCandidates, run_torch_source
from nebisect.minimize.context import ReductionContext, ReductionOutput
from nebisect.oracle import value_divergence
from nebisect.search.ddmin import Evaluator, Reduction, ddmin, hierarchical_ddmin
from nebisect.search.divergence import locate_divergence
from nebisect.sources.convert import PATH_LABELS
from nebisect.targets.spec import REFERENCE_TARGET, TargetSpec
from nebisect.verdict import Verdict

if TYPE_CHECKING:
    from nebisect.minimize.graphs.mil import MilGraph


# ---------------------------------------------------------------------------- programs
class ProgramReduction:
    """Reduce an ML program (the source, or a torch source's conversion) op by op."""

    unit = "ops"

    def run(self, context: ReductionContext) -> ReductionOutput:
        return reduce_program(context)


class TorchGraphReduction:
    """Reduce a torch source's exported graph: submodules first, then nodes."""

    unit = "nodes"

    def run(self, context: ReductionContext) -> ReductionOutput:
        return reduce_torch_graph(context)


def reduce_program(context: ReductionContext) -> ReductionOutput:
    """:class:`ProgramReduction`'s search, from the original run to the repro."""
    from nebisect.isolation import memory
    from nebisect.mil.load import load_program
    from nebisect.minimize.graphs.mil import MilGraph
    from nebisect.sources.resolve import prove_loadable

    options, progress, workdir = context.options, context.progress, context.workdir
    package = _package(context)
    prove_loadable(package, context.label, timeout=options.timeouts.load,
                   isolator=context.isolator)
    inputs_path = _program_inputs(context, package)
    graph = MilGraph(load_program(package.location, package.function,
                                  memory_budget=memory.budget()))
    progress.units(len(graph.units))
    progress.phase("running the original")
    original, arrays = _evaluate(context, package, inputs_path, options.target,
                                 REFERENCE_TARGET)
    if not original.failed:
        detail = f": {original.message}" if original.message else ""
        raise NebisectError(
            f"{context.label} does not fail on {options.target} at the predict stage "
            f"(verdict {original.status}{detail}); nothing to bisect"
        )
    target_mid, reference_mid = split_arrays(arrays, "mid:"), split_arrays(arrays, "refmid:")
    if not reference_mid:
        progress.phase(f"recording intermediates on {REFERENCE}")
        recording, recorded = _evaluate(context, package, inputs_path, REFERENCE, None)
        if recording.failed:
            raise NebisectError(f"{REFERENCE} cannot run {context.label} to record the values "
                                f"a cut is fed with: {recording.message}")
        reference_mid = split_arrays(recorded, "mid:")
    space = MilCandidates(graph, {**load_npz(inputs_path), **reference_mid}, options.target,
                          workdir, context.isolator, options.timeouts)
    evaluator = context.evaluator(space, original.signature)
    reduction, checks = _search_program(context, graph, original, target_mid, reference_mid,
                                        evaluator)
    progress.phase("writing the repro")
    _write_program(context, space.built(reduction.units), reduction, len(graph.units))
    return ReductionOutput(original, reduction, len(graph.units),
                           [graph.op_types[u] for u in reduction.units], original.message,
                           divergence_checks=checks)


def _search_program(context: ReductionContext, graph: MilGraph, original: Verdict,
                    target_mid: dict[str, np.ndarray], reference_mid: dict[str, np.ndarray],
                    evaluator: Evaluator[str]) -> tuple[Reduction[str], int]:
    """First divergence for a mismatch with intermediates, else ddmin; the reduction and
    the cheap intermediate checks spent."""
    progress = context.progress
    if original.status == "mismatch" and target_mid:
        progress.phase("first divergence")
        precision = context.options.target.precision
        found = locate_divergence(graph.dag, value_divergence(target_mid, reference_mid, precision),
                         evaluator)
        if found.signature:
            progress.expected.add(found.signature)
        if found.reduction is not None:
            return found.reduction, found.checks
        if evaluator.stats.stopped:
            return Reduction(list(graph.units), original.signature, evaluator.stats, False,
                             "none"), found.checks
    progress.phase("ddmin over ops")
    return ddmin(graph.units, evaluator, original.signature), 0


def _package(context: ReductionContext) -> SourceRef:
    """The ML program to reduce: the source itself (of a multifunction package, its
    function), or its conversion."""
    source = context.source
    if source.ref.is_package:
        return source.ref
    from nebisect.sources.convert import convert_isolated

    options = context.options
    context.progress.phase("converting")
    package, verdict = convert_isolated(
        source, options.target.precision, context.workdir, context.isolator,
        setup=context.setup, timeout=options.timeouts.convert, paths=options.paths,
        cache=options.cache,
    )
    context.progress.ran()
    if package is None:
        raise NebisectError(
            f"{context.label} does not convert ({verdict.signature}); bisect the conversion "
            "with --stage convert, or convert it with --fix converter-compat"
        )
    return SourceRef(PACKAGE, str(package))


def _program_inputs(context: ReductionContext, package: SourceRef) -> Path:
    from nebisect.sources.inputs import check, describe_package, generate

    described = describe_package(package.location, package.function)
    options = context.options
    if options.inputs:
        check(described, load_npz(options.inputs))
        return Path(options.inputs)
    path = context.workdir / "inputs.npz"
    save_npz(path, generate(described, options.length))
    return path


def _evaluate(context: ReductionContext, package: SourceRef, inputs_path: Path,
              target: TargetSpec, reference: str | None) -> tuple[Verdict, dict[str, np.ndarray]]:
    """One isolated run of the whole program, returning every intermediate."""
    case = Case(package, str(target), inputs_path=str(inputs_path),
                model_sha256=sha256_path(package.location),
                options=CaseOptions(intermediates=True))
    outcome = evaluate(case, reference=reference, isolator=context.isolator,
                       timeout=context.options.timeouts.predict)
    context.progress.ran()
    if outcome.verdict.status == "skipped":
        raise NebisectError(f"{target} cannot run here: {outcome.verdict.message}")
    return outcome.verdict, outcome.arrays


def _write_program(context: ReductionContext, plan: Any, reduction: Reduction[str],
                   before: int) -> None:
    from nebisect.mil.load import save_program
    from nebisect.minimize.graphs.mil import build
    from nebisect.minimize.repro.script import op_of_interest, write_mil_repro

    save_program(build(plan), context.out / "minimized.mlpackage")
    header = (f"Minimized by nebisect bisect from {context.source.location}: "
              f"{len(reduction.units)} of {before} ops still fail on {context.options.target}.")
    target = context.options.target
    write_mil_repro(context.out, plan, signature=reduction.signature, target=target,
                    header=header, op_of_interest=op_of_interest(target, plan))


# ---------------------------------------------------------------------------- torch graphs
def reduce_torch_graph(context: ReductionContext) -> ReductionOutput:
    """:class:`TorchGraphReduction`'s search: submodules first, then nodes.

    The graph is exported, recorded and cut in a child of its own
    (:mod:`nebisect.minimize.graphs.fx_jobs`): the user's ``forward`` never runs here.
    """
    from nebisect.minimize.graphs.fx_jobs import IsolatedFxGraph
    from nebisect.minimize.repro.script import write_torch_repro

    options, progress, workdir = context.options, context.progress, context.workdir
    source, setup = context.source, context.setup
    predict = options.stage == "predict"
    precision = options.target.precision
    arrays = _torch_inputs(context) if predict else None
    progress.phase("converting the original" + (" and running it" if predict else ""))
    original, runs = run_torch_source(
        source.location, precision, setup, workdir, context.isolator, options.timeouts,
        target=options.target if predict else None, inputs=arrays, paths=options.paths,
        cache=options.cache,
    )
    progress.ran(runs)
    _require_failure(context, original)
    progress.phase("exporting and recording the graph")
    recorded_inputs = None
    if arrays is not None:
        recorded_inputs = workdir / "graph-inputs.npz"
        save_npz(recorded_inputs, arrays)
    with context.runner.extra_isolator("persistent") as graph_isolator:
        graph = IsolatedFxGraph(source.location, recorded_inputs, label=context.label,
                                isolator=graph_isolator, timeout=options.timeouts.load)
        progress.units(len(graph.units))
        space = FxCandidates(graph, precision, setup, workdir / "candidates",
                             context.isolator, options.timeouts,
                             target=options.target if predict else None,
                             paths=options.paths)
        evaluator = context.evaluator(space, original.signature)
        progress.phase("hierarchical ddmin: submodules, then nodes")
        reduction = hierarchical_ddmin(graph.units, evaluator, graph.record.levels,
                                       original.signature)
        built = space.built(reduction.units)
    note = "" if progress.line.best < len(graph.units) else (
        "no smaller candidate reproduced the signature (the exported graph may convert "
        "differently from the module)")
    progress.phase("writing the repro")
    header = (f"Minimized by nebisect bisect from {source.location}: {len(reduction.units)} "
              f"of {len(graph.units)} graph nodes still fail the same way at the "
              f"{options.stage} stage.")
    write_torch_repro(context.out, built, signature=original.signature,
                      message=original.message, target=options.target, stage=options.stage,
                      setup=setup, header=header)
    return ReductionOutput(original, reduction, len(graph.units),
                           [graph.record.targets[u] for u in reduction.units],
                           note or original.message)


def _require_failure(context: ReductionContext, original: Verdict) -> None:
    stage = context.options.stage
    if stage == "convert" and not original.failed:
        problem = f"converts on {' and '.join(PATH_LABELS[p] for p in context.options.paths)}"
    elif stage == "predict" and original.stage == "convert":
        problem = f"does not convert ({original.signature})"
    elif stage == "predict" and not original.failed:
        problem = f"does not fail on {context.options.target} after conversion"
    else:
        return
    raise NebisectError(f"{context.label} {problem}; nothing to bisect at --stage {stage}")


def _torch_inputs(context: ReductionContext) -> dict[str, np.ndarray]:
    from nebisect.sources.inputs import check, generate

    options, source = context.options, context.source
    if options.inputs:
        arrays = load_npz(options.inputs)
        check(source.inputs, arrays)
        return arrays
    return generate(source.inputs, options.length)

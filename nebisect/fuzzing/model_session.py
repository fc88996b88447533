"""``nebisect fuzz SOURCE``: one model's campaign, on one target, with ``--jobs`` shards.

Setting up is what ``run`` does before it evaluates a cell: the source is resolved
(a torch factory is described in an isolated child — user code never runs here),
converted once on every ``--convert`` path at the target's precision (one isolated
child), and lint's guided probes are read off the fp16 program. Every shard then
evaluates its cases exactly as ``run`` evaluates a cell — a
:class:`~nebisect.evaluate.workbench.Workbench` of its own, sharing the converted packages, on
its own isolator — and the shards' results merge like ``fuzz --op``'s
(:func:`nebisect.fuzzing.session.merge`), so a given ``--seed`` and ``--jobs`` always give
the same findings.

On a cluster each shard is one ``fuzz-model`` unit: the source's file (and ``.py``
plugins) shipped, the options, the shard's budget and seed as JSON. The worker sets
the session up as this process did — the same resolution, conversion and probes — and
drives exactly the shard a local thread would, so the merged findings are the same
(it converts without ``--cache``: that directory is on this machine).

The campaign's target is ``fuzz``'s: the device's own (``coreml:ne``) on a Mac, its
simulator (``sim:ane``) elsewhere; the oracle is the source's (torch fp64 for a torch
source, the fp64 simulator for a package), as in ``run``.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nebisect.codec import encode
from nebisect.evaluate.judge import split_arrays
from nebisect.evaluate.workbench import Workbench
from nebisect.executors import Unit, UnitResult
from nebisect.executors.runner import Runner
from nebisect.fuzzing.campaign import CampaignProgress, CampaignResult, Evaluation
from nebisect.fuzzing.execute import judged_values, near_miss
from nebisect.fuzzing.model_findings import ModelFindings, model_findings
from nebisect.fuzzing.model_subject import ModelSubject
from nebisect.fuzzing.session import (
    WIRE_ROOT,
    FuzzOptions,
    check_target,
    drive,
    merge,
    options_from_wire,
    received,
    shards,
    wire_options,
)
from nebisect.inputs.guided import guided_probes_of, within_domains
from nebisect.isolate import Isolator
from nebisect.sources.convert import PATHS, convert_paths
from nebisect.sources.resolve import Source, resolve_source
from nebisect.targets.registry import spec_of
from nebisect.targets.spec import TargetSpec
from nebisect.verdict import Verdict


class ModelEvaluator:
    """Evaluates a model subject's cases on one target, one isolated cell each."""

    def __init__(self, subject: ModelSubject, bench: Workbench, target: TargetSpec) -> None:
        self.subject, self.bench, self.target = subject, bench, target

    def __call__(self, case: dict[str, Any]) -> Evaluation:
        npz = self.bench.save_inputs(self.subject.input_set(case).arrays)
        verdict, arrays = self.bench.evaluate_cell(self.target, case["path"], npz)
        output, reference = judged_values(verdict, split_arrays(arrays, "out:"),
                                          split_arrays(arrays, "ref:"))
        return Evaluation(verdict, output, reference, near_miss(verdict), arrays)


class ModelSession:
    """One model's fuzz session; :meth:`run` fuzzes, :meth:`results` merges the shards.

    ``convert`` are the conversion paths to try (``--convert``); ``families`` the value
    families (None: all); ``function`` the function of a multifunction package fuzzed
    (``--function``; "": its default), resolved as ``run`` resolves it; ``cache`` the
    directory a torch source's conversion is read from when it was made before and kept
    in otherwise (``--cache``, :mod:`nebisect.sources.conversion_cache`; "": none). The
    converted packages live in a private directory removed by :meth:`close`.
    """

    def __init__(self, text: str, options: FuzzOptions, *, convert: tuple[str, ...] = PATHS,
                 families: list[str] | None = None, function: str = "", cache: str = "",
                 runner: Runner) -> None:
        check_target(options)
        self.options, self.runner, self.families = options, runner, families
        #: the option's target, parsed once its plugins are described
        self.target = spec_of(options.target)
        isolator = runner.isolator
        self.source: Source = resolve_source(text, function=function,
                                             timeout=options.timeouts.load, isolator=isolator)
        self._tmp = tempfile.TemporaryDirectory(prefix="nebisect-fuzz-model-")
        self.workdir = Path(self._tmp.name)
        self.bench = Workbench(self.source, self.workdir, isolator, self.source.reference,
                               options.timeouts,
                               functools.partial(convert_paths, paths=convert, cache=cache),
                               list(options.plugins), convert)
        paths = self.bench.paths_of(self.target)
        self.skipped = (f"no conversion path converts: {paths.message}"
                        if isinstance(paths, Verdict) else "")
        self.subject = ModelSubject(
            self.source, [] if isinstance(paths, Verdict) else paths,
            [] if self.skipped else within_domains(guided_probes_of(
                self.bench, [self.target]), self.source.domains)[0],
            families, options.seed,
        )
        for length in self.subject.lengths:
            self.subject.family_set(length)  # built once, before worker threads share it
        self.units = [] if self.skipped else shards(options)
        self._campaigns: dict[int, CampaignResult] = {}
        #: why a shard came back with nothing from a cluster (its workers died twice)
        self.lost: list[str] = []

    @property
    def reference(self) -> str:
        return str(self.bench.reference)

    def close(self) -> None:
        self._tmp.cleanup()

    def run(self, on_progress: Callable[[int, CampaignProgress], None] | None = None
            ) -> list[CampaignResult]:
        """Fuzz the model, one shard per runner thread (or cluster unit); the merged
        result."""
        if self.runner.remote:
            self._run_units(on_progress)
            return self.results()

        def work(index: int, isolator: Isolator) -> None:
            report = functools.partial(on_progress, index) if on_progress else None
            self.shard(index, *self.units[index], isolator, report)

        self.runner.map(list(range(len(self.units))), work)
        return self.results()

    def shard(self, index: int, budget: int, seed: int, isolator: Isolator,
              report: Callable[[CampaignProgress], None] | None = None) -> CampaignResult:
        """Drive shard ``index`` (``budget`` cases from ``seed``) on ``isolator``, with a
        workbench of its own sharing the converted packages."""
        bench = self.bench.shard(self.workdir / f"shard-{index}", isolator)
        return drive(self.subject, ModelEvaluator(self.subject, bench, self.target),
                     budget, seed, self.options, report,
                     functools.partial(self._campaigns.__setitem__, index))

    def _run_units(self, on_progress: Callable[[int, CampaignProgress], None] | None) -> None:
        files = [*self.source.ref.files(), *(p for p in self.options.plugins if p.endswith(".py"))]
        options = wire_options(self.options)
        units = [Unit(MODEL_KIND,
                      encode(ModelShard(self.source.location, options, list(self.bench.paths),
                                        self.families, self.source.function, index, budget,
                                        seed)),
                      paths=[file.lstrip("/") for file in files], root=WIRE_ROOT,
                      label=f"{self.subject.name}#{index}")
                 for index, (budget, seed) in enumerate(self.units)]

        def finished(index: int, result: UnitResult) -> None:
            received(result, f"{self.subject.name} shard {index}", index, self._campaigns,
                     self.lost, on_progress)

        self.runner.map_units(units, finished)

    def findings(self, result: CampaignResult, *, explain: bool = True) -> ModelFindings:
        """The merged result's findings in ``run``'s form: explained on the session's
        workbench, grouped, merged by root cause (:mod:`nebisect.fuzzing.model_findings`)."""
        return model_findings(result, self.subject, self.bench, self.target,
                              explain=explain and not self.skipped)

    def results(self) -> list[CampaignResult]:
        """The one merged result (what was found so far, after an interruption)."""
        options, name = self.options, self.subject.name
        if self.skipped:
            return [CampaignResult(name, options.seed, 0, skipped=self.skipped)]
        parts = [self._campaigns[i] for i in range(len(self.units)) if i in self._campaigns]
        merged = merge(parts or [CampaignResult(name, options.seed, 0)], options.seed,
                       options.budget)
        merged.interrupted = merged.interrupted or len(parts) < len(self.units)
        return [merged]


#: the unit kind (:data:`nebisect.executors.units.UNIT_KINDS`)
MODEL_KIND = "fuzz-model"


@dataclass(frozen=True)
class ModelShard:
    """A ``fuzz-model`` unit's arguments: the session's source (its absolute path, shipped
    below the unit's root), options (as :func:`wire_options` writes them), conversion
    paths, value families and function, and the shard's index, budget and seed."""

    source: str
    options: dict[str, Any]
    convert: list[str]
    families: list[str] | None
    function: str
    index: int
    budget: int
    seed: int


def model_shard_unit(shard: ModelShard, root: Path, workdir: Path,
                     isolator: Isolator) -> dict[str, Any]:
    """Handler of ``fuzz-model`` units: the session set up from the shipped source, one
    shard driven as a local thread would drive it, its :class:`CampaignResult`."""
    options = options_from_wire(shard.options, root)
    session = ModelSession(str(root / shard.source.lstrip("/")), options,
                           convert=tuple(shard.convert), families=shard.families,
                           function=shard.function, runner=Runner(isolator=isolator))
    try:
        if session.skipped:
            return CampaignResult(session.subject.name, options.seed, 0,
                                  skipped=session.skipped).to_dict()
        return session.shard(shard.index, shard.budget, shard.seed, isolator).to_dict()
    finally:
        session.close()

"""``nebisect fuzz SOURCE``: one model's campaign, on one target, with ``--jobs`` shards.

Setting up is what ``run`` does before it evaluates a cell: the source is resolved
(a torch factory is described in an isolated child — user code never runs here),
converted once on every ``--convert`` path at the target's precision (one isolated
child), and lint's guided probes are read off the fp16 program. Every shard then
evaluates its cases exactly as ``run`` evaluates a cell — a
:class:`~nebisect.evaluate.workbench.Workbench` of its own, sharing the converted packages, on
its own isolator — and the shards' results merge like ``fuzz --op``'s
(:func:`nebisect.fuzz.session.merge`), so a given ``--seed`` and ``--jobs`` always give
the same findings.

The campaign's target is ``fuzz``'s: the device's own (``coreml:ne``) on a Mac, its
simulator (``sim:ane``) elsewhere; the oracle is the source's (torch fp64 for a torch
source, the fp64 simulator for a package), as in ``run``.
"""

from __future__ import annotations

import functools
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nebisect.evaluate.judge import split_arrays
from nebisect.evaluate.workbench import Workbench
from nebisect.fuzz.campaign import CampaignProgress, CampaignResult, Evaluation
from nebisect.fuzz.execute import judged_values, near_miss
from nebisect.fuzz.model_subject import ModelSubject
from nebisect.fuzz.session import FuzzOptions, check_target, drive, merge, shards
from nebisect.inputs.guided import guided_probes_of, within_domains
from nebisect.isolate import Isolator
from nebisect.isolation.pool import map_isolated
from nebisect.sources.convert import PATHS, convert_paths
from nebisect.sources.resolve import Source, resolve_source
from nebisect.verdict import Verdict


class ModelEvaluator:
    """Evaluates a model subject's cases on one target, one isolated cell each."""

    def __init__(self, subject: ModelSubject, bench: Workbench, target: str) -> None:
        self.subject, self.bench, self.target = subject, bench, target

    def __call__(self, case: dict[str, Any]) -> Evaluation:
        npz = self.bench.save_inputs(self.subject.input_set(case).arrays)
        verdict, arrays = self.bench.run(self.target, case["path"], npz)
        output, reference = judged_values(verdict, split_arrays(arrays, "out:"),
                                          split_arrays(arrays, "ref:"))
        return Evaluation(verdict, output, reference, near_miss(verdict), arrays)


class ModelSession:
    """One model's fuzz session; :meth:`run` fuzzes, :meth:`results` merges the shards.

    ``convert`` are the conversion paths to try (``--convert``); ``families`` the value
    families (None: all). The converted packages live in a private directory removed by
    :meth:`close`.
    """

    def __init__(self, text: str, options: FuzzOptions, *, convert: tuple[str, ...] = PATHS,
                 families: list[str] | None = None, isolator: Isolator) -> None:
        check_target(options)
        self.options = options
        self.source: Source = resolve_source(text, timeout=options.timeouts.load,
                                             isolator=isolator)
        self._tmp = tempfile.TemporaryDirectory(prefix="nebisect-fuzz-model-")
        self.workdir = Path(self._tmp.name)
        self.bench = self._bench(self.workdir, isolator, convert)
        paths = self.bench.paths_of(options.target)
        self.skipped = (f"no conversion path converts: {paths.message}"
                        if isinstance(paths, Verdict) else "")
        self.subject = ModelSubject(
            self.source, [] if isinstance(paths, Verdict) else paths,
            [] if self.skipped else within_domains(guided_probes_of(
                self.bench, [options.target]), self.source.domains)[0],
            families, options.seed,
        )
        for length in self.subject.lengths:
            self.subject.family_set(length)  # built once, before worker threads share it
        self.units = [] if self.skipped else shards(options)
        self._campaigns: dict[int, CampaignResult] = {}

    @property
    def reference(self) -> str:
        return self.bench.reference

    def _bench(self, workdir: Path, isolator: Isolator, convert: tuple[str, ...]) -> Workbench:
        return Workbench(self.source, workdir, isolator, self.source.reference,
                     self.options.timeouts, functools.partial(convert_paths, paths=convert),
                     list(self.options.plugins), convert)

    def close(self) -> None:
        self._tmp.cleanup()

    def run(self, on_progress: Callable[[int, CampaignProgress], None] | None = None
            ) -> list[CampaignResult]:
        """Fuzz the model on ``jobs`` threads (one shard each); the merged result."""
        def work(index: int, isolator: Isolator) -> None:
            budget, seed = self.units[index]
            bench = self._bench(self.workdir / f"shard-{index}", isolator, self.bench.paths)
            bench.workdir.mkdir()
            bench.conversions = dict(self.bench.conversions)
            report = functools.partial(on_progress, index) if on_progress else None
            drive(self.subject, ModelEvaluator(self.subject, bench, self.options.target),
                  budget, seed, self.options, report,
                  functools.partial(self._campaigns.__setitem__, index))

        map_isolated(list(range(len(self.units))), work, self.options.jobs,
                     mode=self.options.isolation)
        return self.results()

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

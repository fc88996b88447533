"""Candidates of a reduction, materialized and evaluated in isolation.

The reducer (:mod:`nebisect.search.ddmin`) only sees unit lists; a *candidate space* turns a
unit list into bytes — an ``.mlpackage`` plus its inputs for MIL programs, a torch
source file plus weights for FX graphs — keyed by the content hash of those bytes, and
runs it in a fresh process exactly like the original failure ran: predict on the target
against ``sim:fp64``; convert on both torch paths; or convert and predict against the
torch module in float64. A unit list that cannot be
materialized (an op whose parameter must stay constant, a cut with no tensor output)
gets an ``invalid:`` signature without running anything: no original failure has one,
so it is never accepted. Candidate files are removed after their evaluation; only the
verdict is kept.
"""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from nebisect.arrays import save_npz, sha256_arrays, sha256_bytes, sha256_path
from nebisect.case import (
    PACKAGE,
    TORCH,
    Case,
    CaseOptions,
    SourceRef,
)
from nebisect.errors import NebisectError
from nebisect.evaluate.judge import evaluate
from nebisect.isolate import Isolator
from nebisect.isolation.timeouts import Timeouts
from nebisect.minimize.graphs.fx import TorchCandidate
from nebisect.minimize.graphs.mil import MilGraph, SubgraphPlan, build
from nebisect.sources.convert import PATHS
from nebisect.targets.spec import REFERENCE_SPEC, REFERENCE_TARGET, TORCH_REFERENCE, TargetSpec
from nebisect.verdict import Verdict

REFERENCE = REFERENCE_SPEC


def _units_key(units: Sequence[str]) -> str:
    return sha256_bytes("\n".join(units).encode())


class CandidateSpace(ABC):
    """Shared bookkeeping: the materialization cache, the work dir, the run counter."""

    def __init__(self, workdir: Path, isolator: Isolator, timeouts: Timeouts) -> None:
        self.workdir = workdir
        self.isolator = isolator
        self.timeouts = timeouts
        self.runs = 0
        self._made: dict[str, Any] = {}

    @abstractmethod
    def _materialize(self, units: Sequence[str]) -> Any:
        """The candidate of ``units`` as data (raises a NebisectError when impossible)."""

    @abstractmethod
    def _evaluate(self, made: Any, directory: Path) -> Verdict | str:
        """Write the materialized candidate into ``directory`` and evaluate it isolated."""

    def test(self, units: Sequence[str]) -> Verdict | str:
        """Evaluate the candidate of ``units`` in a fresh process (``invalid:…`` if none)."""
        made = self.made(units)
        if isinstance(made, NebisectError):
            return f"invalid:{made}"
        directory = self._directory(made.digest())
        try:
            return self._evaluate(made, directory)
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    def built(self, units: Sequence[str]) -> Any:
        """The materialized candidate of ``units``; raises what prevents it."""
        made = self.made(units)
        if isinstance(made, NebisectError):
            raise made
        return made

    def made(self, units: Sequence[str]) -> Any:
        """The materialized candidate of ``units`` (cached), or the error that prevents it."""
        key = _units_key(units)
        if key not in self._made:
            try:
                self._made[key] = self._materialize(units)
            except NebisectError as exc:
                self._made[key] = exc
        return self._made[key]

    def key(self, units: Sequence[str]) -> str:
        """Content hash of the candidate (or of the unit list when it cannot be built)."""
        made = self.made(units)
        if isinstance(made, NebisectError):
            return f"invalid:{_units_key(units)}"
        return str(made.digest())

    def _directory(self, digest: str) -> Path:
        directory = self.workdir / digest[:16]
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        return directory


class MilCandidates(CandidateSpace):
    """Op subsets of one MIL program, predicted on ``target`` against ``sim:fp64``."""

    def __init__(self, graph: MilGraph, recorded: dict[str, np.ndarray],
                 target: TargetSpec,
                 workdir: Path, isolator: Isolator, timeouts: Timeouts) -> None:
        super().__init__(workdir, isolator, timeouts)
        self.graph = graph
        self.recorded = recorded
        self.target = target

    def _materialize(self, units: Sequence[str]) -> SubgraphPlan:
        return self.graph.plan(units, self.recorded)

    def _evaluate(self, made: SubgraphPlan, directory: Path) -> Verdict | str:
        from nebisect.mil.load import save_program

        try:
            save_program(build(made), directory / "model.mlpackage")
        except NebisectError as exc:
            return f"invalid:{exc}"
        save_npz(directory / "inputs.npz", made.feeds)
        case = Case(SourceRef(PACKAGE, str(directory / "model.mlpackage")), str(self.target),
                    inputs_path=str(directory / "inputs.npz"),
                    model_sha256=made.digest(), inputs_sha256=sha256_arrays(made.feeds))
        self.runs += 1
        return evaluate(case, reference=REFERENCE_TARGET, isolator=self.isolator,
                        timeout=self.timeouts.predict).verdict


class Subgraphs(Protocol):
    """What builds a torch candidate from a node subset: an
    :class:`~nebisect.minimize.graphs.fx.FxGraph` here, or the parent's
    :class:`~nebisect.minimize.graphs.fx_jobs.IsolatedFxGraph` that asks a child for it."""

    def candidate(self, units: Sequence[str]) -> TorchCandidate: ...


class FxCandidates(CandidateSpace):
    """Node subsets of an exported torch module: converted on the torch ``paths`` (the
    first that converts is kept) and, for a ``predict``-stage failure (``target``
    given), predicted against the candidate module itself in float64."""

    def __init__(self, graph: Subgraphs, precision: str, setup: tuple[str, ...],
                 workdir: Path, isolator: Isolator, timeouts: Timeouts,
                 target: TargetSpec | None = None, paths: tuple[str, ...] = PATHS) -> None:
        super().__init__(workdir, isolator, timeouts)
        self.graph = graph
        self.precision = precision
        self.setup = setup
        self.target = target
        self.paths = paths

    def _materialize(self, units: Sequence[str]) -> TorchCandidate:
        return self.graph.candidate(units)

    def _evaluate(self, made: TorchCandidate, directory: Path) -> Verdict | str:
        location = made.write(directory, "nebisect bisect candidate")
        verdict, runs = run_torch_source(
            location, self.precision, self.setup, directory, self.isolator, self.timeouts,
            target=self.target, inputs=made.inputs if self.target else None, paths=self.paths,
        )
        self.runs += runs
        return verdict


def coreml_feeds(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Inputs as a converted package takes them: float32 floats, int32 everything else
    (the torch reference casts them back to the example inputs' dtypes)."""
    return {name: value.astype(np.float32 if value.dtype.kind == "f" else np.int32)
            for name, value in arrays.items()}


def run_torch_source(location: str, precision: str, setup: tuple[str, ...], directory: Path,
                     isolator: Isolator, timeouts: Timeouts, *,
                     target: TargetSpec | None = None,
                     inputs: dict[str, np.ndarray] | None = None,
                     paths: tuple[str, ...] = PATHS, cache: str = "") -> tuple[Verdict, int]:
    """Convert a torch source in isolation on ``paths`` (the first that converts is
    kept; read from and kept in the conversion cache ``cache`` when one is given) and,
    with ``target`` and ``inputs``, predict the package on ``target`` against the module
    in float64 (a second isolated run). Returns the verdict that decides (conversion's,
    or prediction's) and the run count."""
    from nebisect.sources.convert import convert_isolated
    from nebisect.sources.resolve import Source

    package, verdict = convert_isolated(Source("torch", location), precision, directory,
                                        isolator, setup=setup, timeout=timeouts.convert,
                                        paths=paths, cache=cache)
    if target is None or inputs is None or package is None:
        return verdict, 1
    feeds = coreml_feeds(inputs)
    path = directory / "coreml-inputs.npz"
    save_npz(path, feeds)
    case = Case(SourceRef(PACKAGE, str(package)), str(target), inputs_path=str(path),
                model_sha256=sha256_path(package), inputs_sha256=sha256_arrays(feeds),
                options=CaseOptions().judged_against(
                    SourceRef(TORCH, location), source=SourceRef(PACKAGE, str(package)),
                    precision=target.precision))
    outcome = evaluate(case, reference=TORCH_REFERENCE, isolator=isolator,
                       timeout=timeouts.predict)
    return outcome.verdict, 2

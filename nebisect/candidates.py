"""Candidates of a reduction, materialized and evaluated in isolation.

The reducer (:mod:`nebisect.bisect`) only sees unit lists; a *candidate space* turns a
unit list into bytes — an ``.mlpackage`` plus its inputs for MIL programs, a torch
source file plus weights for FX graphs — keyed by the content hash of those bytes, and
runs it in a fresh process exactly like the original failure ran: predict on the target
against ``sim:fp64``, or convert on both torch paths. A unit list that cannot be
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
from typing import Any

import numpy as np

from nebisect.case import Case, NebisectError, save_npz, sha256_arrays, sha256_bytes
from nebisect.graphs.fx import FxGraph, TorchCandidate
from nebisect.graphs.mil import MilGraph, Plan, build
from nebisect.isolate import Isolator
from nebisect.runner import evaluate
from nebisect.verdict import Verdict

REFERENCE = "sim:fp64"


def _units_key(units: Sequence[str]) -> str:
    return sha256_bytes("\n".join(units).encode())


class CandidateSpace(ABC):
    """Shared bookkeeping: the materialization cache, the work dir, the run counter."""

    def __init__(self, workdir: Path, isolator: Isolator, timeout: float) -> None:
        self.workdir = workdir
        self.isolator = isolator
        self.timeout = timeout
        self.runs = 0
        self._made: dict[str, Any] = {}

    @abstractmethod
    def _materialize(self, units: Sequence[str]) -> Any:
        """The candidate of ``units`` as data (raises a NebisectError when impossible)."""

    @abstractmethod
    def test(self, units: Sequence[str]) -> Verdict | str:
        """Evaluate the candidate of ``units`` in a fresh process."""

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

    def __init__(self, graph: MilGraph, recorded: dict[str, np.ndarray], target: str,
                 workdir: Path, isolator: Isolator, timeout: float) -> None:
        super().__init__(workdir, isolator, timeout)
        self.graph = graph
        self.recorded = recorded
        self.target = target

    def _materialize(self, units: Sequence[str]) -> Plan:
        return self.graph.plan(units, self.recorded)

    def plan(self, units: Sequence[str]) -> Plan:
        made = self.made(units)
        if isinstance(made, NebisectError):
            raise made
        return made

    def test(self, units: Sequence[str]) -> Verdict | str:
        from nebisect.mil.load import save_program

        made = self.made(units)
        if isinstance(made, NebisectError):
            return f"invalid:{made}"
        directory = self._directory(made.digest())
        try:
            try:
                save_program(build(made), directory / "model.mlpackage")
            except NebisectError as exc:
                return f"invalid:{exc}"
            save_npz(directory / "inputs.npz", made.feeds)
            case = Case(str(directory / "model.mlpackage"), "mlpackage", self.target,
                        inputs_path=str(directory / "inputs.npz"),
                        model_sha256=made.digest(), inputs_sha256=sha256_arrays(made.feeds))
            self.runs += 1
            return evaluate(case, reference=REFERENCE, isolator=self.isolator,
                            timeout=self.timeout).verdict
        finally:
            shutil.rmtree(directory, ignore_errors=True)


class FxCandidates(CandidateSpace):
    """Node subsets of an exported torch module, converted on both torch paths."""

    def __init__(self, graph: FxGraph, precision: str, setup: tuple[str, ...],
                 workdir: Path, isolator: Isolator, timeout: float) -> None:
        super().__init__(workdir, isolator, timeout)
        self.graph = graph
        self.precision = precision
        self.setup = setup

    def _materialize(self, units: Sequence[str]) -> TorchCandidate:
        return self.graph.candidate(units)

    def candidate(self, units: Sequence[str]) -> TorchCandidate:
        made = self.made(units)
        if isinstance(made, NebisectError):
            raise made
        return made

    def test(self, units: Sequence[str]) -> Verdict | str:
        from nebisect.convert import convert_isolated
        from nebisect.source import Source

        made = self.made(units)
        if isinstance(made, NebisectError):
            return f"invalid:{made}"
        directory = self._directory(made.digest())
        try:
            location = made.write(directory, "nebisect bisect candidate")
            self.runs += 1
            _, verdict = convert_isolated(Source("torch", location), self.precision, directory,
                                          self.isolator, setup=self.setup,
                                          timeout=self.timeout)
            return verdict
        finally:
            shutil.rmtree(directory, ignore_errors=True)

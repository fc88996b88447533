"""The workbench of one model: every cell — a target × conversion path × inputs file —
judged in isolation, once.

Torch sources are converted for each precision (fp16 targets get a FLOAT16 program,
everything else FLOAT32), every requested path in one isolated child — the converter
``run`` gives converts each path once for every precision its targets need and derives
one from the other (:func:`nebisect.sources.convert.convert_paths`); a package source
has one program and the path ``""``. Every verdict is cached by its :class:`CellKey`, so
a cell that exploration, attribution or the report asks for twice runs once. Explaining
a failing cell (where it enters, at which op) is :mod:`nebisect.detect.attribution`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nebisect.arrays import load_npz, save_npz, sha256_arrays, sha256_path
from nebisect.case import PACKAGE, Case, CaseOptions, SourceRef
from nebisect.evaluate.judge import evaluate_together, evaluation_needs
from nebisect.evaluate.programs import ProgramOutline, outline
from nebisect.isolate import Isolator, Needs, Outcome
from nebisect.isolation.timeouts import Timeouts
from nebisect.sources.convert import (
    OVERRIDES_NOTE,
    ConversionAttempt,
    cured_attempts,
    cured_failures,
    failed_attempts,
)
from nebisect.sources.resolve import Source
from nebisect.targets.placement import required_devices
from nebisect.targets.sim import shares_predictions
from nebisect.targets.spec import TargetSpec
from nebisect.verdict import Stage, Verdict

#: The stage a case's verdict names when its reference, not its target, failed.
REFERENCE_STAGE = Stage.REFERENCE

#: convert(source, precision, workdir, isolator, timeout=) → ({path: package}, verdict)
Converter = Callable[..., tuple[dict[str, Path], Verdict]]


def _conversion_key(precision: str) -> str:
    """The conversion a target of ``precision`` runs: ``fp16`` programs for fp16 targets,
    ``fp32`` for every other."""
    return "fp16" if precision == "fp16" else "fp32"


def reference_failure(verdict: Verdict) -> bool:
    """True when the case failed in its reference, so the target was never judged."""
    return verdict.failed and verdict.stage == REFERENCE_STAGE


@dataclass(frozen=True)
class CellKey:
    """One cell: the target, the conversion path it runs (``""``: none) and its inputs
    file."""

    target: TargetSpec
    path: str
    inputs: str


@dataclass(frozen=True)
class Conversion:
    """One conversion of a torch source: the package of every path that converted, by
    path name (empty when none did), and the convert verdict."""

    packages: dict[str, Path]
    verdict: Verdict


@dataclass
class Workbench:
    """Runs the cells of one source with one isolator (see the module docstring).

    ``plugins`` are named in every case (the child imports them); ``paths`` are the
    conversion paths asked for (``run --convert``). ``saved`` maps the label of every
    input set evaluated to its inputs file (what a failure group's trigger is read from).
    ``require`` says where placement fails closed: None (bisection, fuzzing) on every
    target that places ops on a device; a tuple of devices (``run --require``) only on
    the targets that place on one of them — elsewhere placement off the device is a note
    in the verdict (:attr:`~nebisect.case.CaseOptions.note_placement`). ``steps``: the
    decode steps a stateful source's cells are judged over (one for a source without
    state, whose case then stays as it always was). ``clock`` times the cells.
    ``together``: the run's targets whose cells on one program and inputs file are
    judged in one child when they share predictions (``sim:fp16`` with ``sim:ane``,
    :func:`~nebisect.evaluate.judge.evaluate_together`): asking for one judges the
    others not judged yet.
    """

    source: Source
    workdir: Path
    isolator: Isolator
    reference: TargetSpec
    timeouts: Timeouts
    convert: Converter | None = None
    plugins: list[str] = field(default_factory=list)
    paths: tuple[str, ...] = ("export", "trace")
    require: tuple[str, ...] | None = None
    steps: int = 1
    conversions: dict[str, Conversion] = field(default_factory=dict)
    together: tuple[TargetSpec, ...] = ()
    #: what a cell's wall seconds are read with (a planning test gives a fake one)
    clock: Callable[[], float] = time.perf_counter
    saved: dict[str, str] = field(default_factory=dict)
    _runs: dict[CellKey, tuple[Verdict, dict[str, np.ndarray]]] = field(
        default_factory=dict)
    _outlines: dict[SourceRef, ProgramOutline] = field(default_factory=dict)
    _spent: dict[str, float] = field(
        default_factory=lambda: {"predictions": 0.0, "reference": 0.0})
    #: each target's cheapest cell so far, wall seconds (:meth:`prediction_seconds`)
    _cheapest: dict[TargetSpec, float] = field(default_factory=dict)
    #: per inputs file, the longest reference part of its cells: the one that computed
    #: it, the others read it cached (:meth:`reference_seconds`)
    _references: dict[str, float] = field(default_factory=dict)

    def shard(self, workdir: Path, isolator: Isolator) -> Workbench:
        """A workbench of the same model for another thread: the conversions made so far
        shared, its own ``workdir`` (made here), isolator and caches."""
        workdir.mkdir()
        return Workbench(self.source, workdir, isolator, self.reference, self.timeouts,
                         self.convert, list(self.plugins), self.paths, self.require,
                         self.steps, dict(self.conversions), self.together, self.clock)

    # -- inputs and programs -----------------------------------------------------------

    def save_inputs(self, arrays: dict[str, np.ndarray], label: str = "") -> str:
        """A content-addressed ``.npz`` of ``arrays`` in the workdir (written once),
        remembered under ``label`` in ``saved`` when one is given."""
        path = self.workdir / "inputs" / f"{sha256_arrays(arrays)[:24]}.npz"
        if not path.is_file():
            path.parent.mkdir(exist_ok=True)
            save_npz(path, arrays)
        if label:
            self.saved[label] = str(path)
        return str(path)

    def paths_of(self, target: TargetSpec, *, convert: bool = True) -> list[str] | Verdict:
        """The conversion paths ``target``'s cells run (``[""]``: no conversion), or the
        convert verdict when no path converts. Without ``convert`` nothing is converted
        now: a target whose conversion has not run has no paths (``[]``)."""
        if not self.source.ref.is_torch or not target.runs_programs:
            return [""]
        precision = target.precision
        if not convert and _conversion_key(precision) not in self.conversions:
            return []
        conversion = self._converted(precision)
        return list(conversion.packages) or conversion.verdict

    def failed_paths(self, target: TargetSpec, *, convert: bool = True) -> list[ConversionAttempt]:
        """The conversion paths that failed for ``target`` while another converted (none
        when ``target`` runs no conversion, or none converted); ``convert`` as for
        :meth:`paths_of`."""
        paths = self.paths_of(target, convert=convert)
        if isinstance(paths, Verdict) or paths in ([""], []):
            return []
        return failed_attempts(self._converted(target.precision).verdict)

    def cured_paths(self, target: TargetSpec, *, convert: bool = True) -> list[ConversionAttempt]:
        """The conversion paths of ``target`` that failed at coremltools' defaults and
        converted with nebisect's converter overrides (``run``'s default; none under
        ``--strict-conversion`` or ``--converter-overrides``): each is judged, and its
        failure at the defaults is a finding of its own; ``convert`` as for
        :meth:`paths_of`."""
        paths = self.paths_of(target, convert=convert)
        if isinstance(paths, Verdict) or paths in ([""], []):
            return []
        return cured_attempts(self._converted(target.precision).verdict)

    def cured_failures(self, target: TargetSpec, *, convert: bool = True
                       ) -> list[tuple[str, Verdict]]:
        """The failures at coremltools' defaults of :meth:`cured_paths`, as ``(path,
        verdict)`` (:func:`~nebisect.sources.convert.cured_failures`: per path, or one
        with path ``""`` when no path converted at the defaults)."""
        if not self.cured_paths(target, convert=convert):
            return []
        return cured_failures(self._converted(target.precision).verdict)

    def _note_overrides(self, key: CellKey, verdict: Verdict) -> None:
        """Say on the verdict of a cell whose program converted only with nebisect's
        converter overrides that it did, so that nobody reads it as the program
        coremltools makes at its defaults."""
        if key.path and any(a.path == key.path for a in self.cured_paths(key.target)) and (
                OVERRIDES_NOTE not in verdict.target_facts.notes):
            verdict.target_facts.notes.append(OVERRIDES_NOTE)

    def convert_verdicts(self) -> dict[str, Verdict]:
        """The verdict of every conversion made so far, by conversion precision."""
        return {key: conversion.verdict for key, conversion in self.conversions.items()}

    def _converted(self, precision: str) -> Conversion:
        """Convert once per conversion precision (fp16 → FLOAT16, else FLOAT32)."""
        key = _conversion_key(precision)
        if key not in self.conversions:
            assert self.convert is not None, "torch sources need a converter"
            self.conversions[key] = Conversion(*self.convert(
                self.source, key, self.workdir, self.isolator, timeout=self.timeouts.convert))
        return self.conversions[key]

    def program(self, target: TargetSpec, path: str) -> SourceRef:
        """The package ``target`` runs on ``path`` (the source itself for a package, with
        its function)."""
        if not self.source.ref.is_torch:
            return self.source.ref
        return SourceRef(PACKAGE, str(self._converted(target.precision).packages[path]))

    def outline(self, target: TargetSpec, path: str) -> ProgramOutline:
        """The dependency view of that package (read once, in the template that
        evaluates ``target``: coremltools is never imported in this process)."""
        package = self.program(target, path)
        if package not in self._outlines:
            self._outlines[package] = outline(
                package, isolator=self.isolator, timeout=self.timeouts.load,
                needs=self.needs(target))
        return self._outlines[package]

    def needs(self, target: TargetSpec) -> Needs:
        """What the children that evaluate ``target``'s cells need: a torch source's
        reference runs there, so they find the module built."""
        held = self.source.location if self.source.ref.is_torch and self.reference else ""
        return evaluation_needs(str(target), str(self.reference), held)

    # -- running ---------------------------------------------------------------------------

    def case(self, target: TargetSpec, path: str, npz: str) -> Case:
        """The case of one cell (``path`` must have converted for ``target``)."""
        options = CaseOptions(plugins=tuple(self.plugins),
                              masked_outputs=dict(self.source.masked_outputs),
                              note_placement=self.notes_placement(target),
                              steps=self.case_steps)
        model = self.source.ref
        if model.is_torch:
            if path:
                model = self.program(target, path)
            options = options.judged_against(
                self.source.ref, source=model, precision=target.precision,
                reference_precision=self.reference.precision)
        model_hash = sha256_path(model.location) if model.is_package else ""
        return Case(model, str(target), inputs_path=npz, model_sha256=model_hash,
                    inputs_sha256=sha256_arrays(load_npz(npz)), options=options)

    @property
    def case_steps(self) -> int:
        """The steps a cell's case is judged over: :attr:`steps` for a stateful source."""
        return self.steps if self.source.states else 1

    def notes_placement(self, target: TargetSpec) -> bool:
        """Is placement off ``target``'s device a note rather than ``unrouted`` (see
        ``require``)?"""
        devices = required_devices(str(target))
        return self.require is not None and bool(devices) and not set(devices) & set(
            self.require)

    def rejudge(self, reference: TargetSpec) -> None:
        """Judge against ``reference`` from now on: the cells evaluated against the
        previous one are dropped (the conversions stay)."""
        self.reference = reference
        self._runs.clear()

    def cached(self, key: CellKey) -> bool:
        """Has the cell been evaluated?"""
        return key in self._runs

    def store(self, key: CellKey, verdict: Verdict,
              arrays: dict[str, np.ndarray]) -> None:
        """A cell's verdict and outputs evaluated elsewhere (:mod:`nebisect.detect.remote`)."""
        self._priced(key.target, verdict.timings.total or 0.0)
        self._note_overrides(key, verdict)
        self._runs[key] = verdict, arrays

    def evaluate_cell(self, target: TargetSpec, path: str,
                      npz: str) -> tuple[Verdict, dict[str, np.ndarray]]:
        """The verdict of one cell and its outputs (``out:``/``ref:`` arrays), cached;
        the cells of the targets :attr:`together` with it are judged in its child."""
        key = CellKey(target, path, npz)
        if key not in self._runs:
            partners = [CellKey(other, path, npz) for other in self.together
                        if shares_predictions(target, other)
                        and CellKey(other, path, npz) not in self._runs]
            started = self.clock()
            outcomes = evaluate_together(
                self.case(target, path, npz), [self.case(k.target, path, npz) for k in partners],
                reference=str(self.reference), isolator=self.isolator,
                timeout=self.timeouts.predict, reference_cache=str(self.workdir / "references"))
            total = self.clock() - started
            shares = [outcome.verdict.timings.wall or 0.0 for outcome in outcomes[1:]]
            own = total - sum(shares)
            self._record(key, outcomes[0], own, own)
            for partner, outcome, share in zip(partners, outcomes[1:], shares, strict=True):
                # Priced as the cell it was judged beside: alone, it runs the whole program.
                self._record(partner, outcome, share, max(own, share))
        return self._runs[key]

    def _record(self, key: CellKey, outcome: Outcome, total: float, price: float) -> None:
        """Keep a cell's verdict and outputs; ``total``: its wall seconds, ``price``: what
        one more of its target's predictions is planned to cost."""
        timings = outcome.verdict.timings
        if timings.total is None:
            timings.total = total
        self._spent["predictions"] += total
        self._priced(key.target, price)
        self._references[key.inputs] = max(timings.reference or 0.0,
                                           self._references.get(key.inputs, 0.0))
        self._spent["reference"] += timings.reference or 0.0
        self._note_overrides(key, outcome.verdict)
        self._runs[key] = outcome.verdict, outcome.arrays

    def _priced(self, target: TargetSpec, seconds: float) -> None:
        self._cheapest[target] = min(seconds, self._cheapest.get(target, seconds))

    def prediction_seconds(self, target: TargetSpec) -> float | None:
        """Wall seconds of ``target``'s cheapest cell so far (its first, when it has one):
        what one more of its predictions is planned to cost, without what only a first
        cell pays (a template still importing), None before it has one."""
        return self._cheapest.get(target)

    def reference_seconds(self) -> float:
        """What computing the expected outputs of one more input set costs: the cheapest
        computation so far (0 before any)."""
        return min(self._references.values(), default=0.0)

    def seconds(self) -> dict[str, float]:
        """Wall seconds of the conversions and of the cells run so far, and the part of
        the cells spent computing the reference (what ``run``'s summary reports)."""
        return {"conversion": sum(c.verdict.timings.wall or 0.0
                                  for c in self.conversions.values()), **self._spent}

"""One cell of the run matrix — a target × conversion path × input set — run in isolation,
and the explanation of a failing one: its attribution and the op where it enters.

Attribution answers "where does the divergence enter?" with two extra evaluations made
only when something fails, on the *same conversion path* as the failing cell:

* ``conversion`` — the converted program, evaluated exactly (``sim:fp64``), already
  disagrees with torch: the converter emitted different math;
* ``precision`` — exact evaluation agrees, a careful fp16 evaluation (``sim:fp16``)
  does not: a graph-level range hazard any fp16 device would hit;
* ``device`` — both agree; only the device (or its simulated profile) disagrees.

The culprit (:mod:`nebisect.detect.culprit`) costs one more evaluation, recording
intermediates. Every verdict is cached by (target, path, inputs file), so a probe the
matrix already ran is never run twice. Torch sources are converted once per precision
(fp16 targets get a FLOAT16 program, everything else FLOAT32), every requested path in
one isolated child; a package source has one program and the path ``""``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from nebisect.case import (
    REFERENCE_TARGET,
    Case,
    CaseOptions,
    load_npz,
    save_npz,
    sha256_arrays,
    sha256_path,
)
from nebisect.detect.culprit import Culprit, by_intermediates, by_outputs
from nebisect.detect.evaluate import SECONDS, evaluate, evaluation_preload, split_arrays
from nebisect.detect.families import InputSet
from nebisect.detect.programs import ProgramOutline, outline
from nebisect.isolate import Isolator
from nebisect.isolation.timeouts import Timeouts
from nebisect.sources.resolve import Source
from nebisect.targets import spec_of
from nebisect.verdict import Stage, Verdict

ATTRIBUTIONS = ("conversion", "precision", "device")
PRECISION_PROBE = "sim:fp16"
EXACT_PROBE = REFERENCE_TARGET
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


def attribute(target: str, verdict: Verdict, exact_ok: bool | None, fp16_ok: bool | None) -> str:
    """Where a failing cell's divergence enters (see the module docstring)."""
    if verdict.stage == "convert" or exact_ok is False:
        return "conversion"
    if target in (PRECISION_PROBE, "sim:fp16-naive", "sim:fp32"):
        return "precision"
    if fp16_ok is False and spec_of(target).precision == "fp16":
        return "precision"
    return "device"


@dataclass
class Cells:
    """Runs cells of one source with one isolator (see the module docstring).

    ``plugins`` are named in every case (the child imports them); ``paths`` are the
    conversion paths asked for (``run --convert``). ``saved`` maps the label of every
    input set evaluated to its inputs file (what a failure group's trigger is read from).
    """

    source: Source
    workdir: Path
    isolator: Isolator
    reference: str
    timeouts: Timeouts
    convert: Converter | None = None
    plugins: list[str] = field(default_factory=list)
    paths: tuple[str, ...] = ("export", "trace")
    packages: dict[str, dict[str, Path]] = field(default_factory=dict)
    conversions: dict[str, Verdict] = field(default_factory=dict)
    saved: dict[str, str] = field(default_factory=dict)
    _runs: dict[tuple[str, str, str], tuple[Verdict, dict[str, np.ndarray]]] = field(
        default_factory=dict)
    _explained: dict[tuple[str, str, str], tuple[str, Culprit | None]] = field(
        default_factory=dict)
    _outlines: dict[Path, ProgramOutline] = field(default_factory=dict)
    _spent: dict[str, float] = field(
        default_factory=lambda: {"predictions": 0.0, "reference": 0.0})

    # -- inputs and programs -----------------------------------------------------------

    def save_inputs(self, arrays: dict[str, np.ndarray]) -> str:
        """A content-addressed ``.npz`` of ``arrays`` in the workdir (written once)."""
        path = self.workdir / "inputs" / f"{sha256_arrays(arrays)[:24]}.npz"
        if not path.is_file():
            path.parent.mkdir(exist_ok=True)
            save_npz(path, arrays)
        return str(path)

    def save_set(self, input_set: InputSet) -> str:
        """:meth:`save_inputs` of an input set, remembered under its label in ``saved``."""
        path = self.saved[input_set.label] = self.save_inputs(input_set.arrays)
        return path

    def paths_of(self, target: str, *, convert: bool = True) -> list[str] | Verdict:
        """The conversion paths ``target``'s cells run (``[""]``: no conversion), or the
        convert verdict when no path converts. Without ``convert`` nothing is converted
        now: a target whose conversion has not run has no paths (``[]``)."""
        if self.source.kind != "torch" or target.startswith("torch:"):
            return [""]
        precision = spec_of(target).precision
        if not convert and _conversion_key(precision) not in self.conversions:
            return []
        packages, verdict = self._converted(precision)
        return list(packages) if packages else verdict

    def _converted(self, precision: str) -> tuple[dict[str, Path], Verdict]:
        """Convert once per conversion precision (fp16 → FLOAT16, else FLOAT32)."""
        key = _conversion_key(precision)
        if key not in self.conversions:
            assert self.convert is not None, "torch sources need a converter"
            self.packages[key], self.conversions[key] = self.convert(
                self.source, key, self.workdir, self.isolator, timeout=self.timeouts.convert)
        return self.packages[key], self.conversions[key]

    def program(self, target: str, path: str) -> Path:
        """The package ``target`` runs on ``path`` (the source itself for a package)."""
        if self.source.kind != "torch":
            return Path(self.source.location)
        return self._converted(spec_of(target).precision)[0][path]

    def outline(self, target: str, path: str) -> ProgramOutline:
        """The dependency view of that package (read once, in the template that
        evaluates ``target``: coremltools is never imported in this process)."""
        package = self.program(target, path)
        if package not in self._outlines:
            self._outlines[package] = outline(
                str(package), isolator=self.isolator, timeout=self.timeouts.load,
                preload=self.preload(target))
        return self._outlines[package]

    def preload(self, target: str) -> tuple[str, ...]:
        """The preload of the template that evaluates ``target``'s cells: a torch
        source's reference runs there, so it holds the module built."""
        held = self.source.location if self.source.kind == "torch" and self.reference else ""
        return evaluation_preload(target, self.reference, held)

    # -- running ---------------------------------------------------------------------------

    def case(self, target: str, path: str, npz: str) -> Case:
        """The case of one cell (``path`` must have converted for ``target``)."""
        options = CaseOptions(plugins=tuple(self.plugins),
                              masked_outputs=dict(self.source.masked_outputs))
        kind, location = self.source.kind, self.source.location
        if self.source.kind == "torch":
            if path:
                kind, location = "mlpackage", str(self.program(target, path))
            options = options.judged_against(("torch", self.source.location), source_kind=kind,
                                             precision=spec_of(target).precision)
        model_hash = sha256_path(location) if kind == "mlpackage" else ""
        return Case(location, kind, target, inputs_path=npz, model_sha256=model_hash,
                    inputs_sha256=sha256_arrays(load_npz(npz)), options=options)

    def cached(self, key: tuple[str, str, str]) -> bool:
        """Has the cell (target, path, inputs file) been evaluated?"""
        return key in self._runs

    def store(self, key: tuple[str, str, str], verdict: Verdict,
              arrays: dict[str, np.ndarray]) -> None:
        """A cell's verdict and outputs evaluated elsewhere (:mod:`nebisect.detect.remote`)."""
        self._runs[key] = verdict, arrays

    def run(self, target: str, path: str, npz: str) -> tuple[Verdict, dict[str, np.ndarray]]:
        """The verdict of one cell and its outputs (``out:``/``ref:`` arrays), cached."""
        key = (target, path, npz)
        if key not in self._runs:
            started = time.perf_counter()
            outcome = evaluate(self.case(target, path, npz), reference=self.reference,
                               isolator=self.isolator, timeout=self.timeouts.predict,
                               timed=True, reference_cache=str(self.workdir / "references"))
            total = time.perf_counter() - started
            outcome.verdict.timings.setdefault("total", total)
            seconds = outcome.verdict.metrics.pop(SECONDS, {})
            self._spent["predictions"] += total
            self._spent["reference"] += seconds.get("reference", 0.0)
            self._runs[key] = outcome.verdict, outcome.arrays
        return self._runs[key]

    def seconds(self) -> dict[str, float]:
        """Wall seconds of the conversions and of the cells run so far, and the part of
        the cells spent computing the reference (what ``run``'s summary reports)."""
        return {"conversion": sum(v.timings.get("wall", 0.0)
                                  for v in self.conversions.values()), **self._spent}

    # -- explaining -------------------------------------------------------------------------

    def explain(
        self, target: str, path: str, npz: str, verdict: Verdict
    ) -> tuple[str, Culprit | None]:
        """The attribution of a failing cell and its culprit op (None when no op can be
        named: an error before any output, or a target that records no intermediates)."""
        key = (target, path, npz)
        if key not in self._explained:
            attribution = self.attribution(target, path, npz, verdict)
            culprit = None
            if verdict.status == "mismatch":
                culprit = self._culprit(target, path, npz, attribution)
            self._explained[key] = attribution, culprit
        return self._explained[key]

    def attribution(self, target: str, path: str, npz: str, verdict: Verdict) -> str:
        """The attribution alone: at most two probes, both cached across targets.

        A numeric divergence is explained by a probe that diverges at all; an error or a
        crash only by a probe that fails the same way (an fp16 overflow elsewhere in
        the graph does not explain a shape error).
        """
        same = None if verdict.status == "mismatch" else verdict.signature
        exact_ok = (self._probe(EXACT_PROBE, path, npz, same) if self.source.kind == "torch"
                    else None)
        fp16_ok = self._probe(PRECISION_PROBE, path, npz, same)
        return attribute(target, verdict, exact_ok, fp16_ok)

    def probe_keys(self, path: str, npz: str) -> list[tuple[str, str, str]]:
        """The cells :meth:`attribution` may evaluate for a failing cell on ``path``."""
        probes = [EXACT_PROBE, PRECISION_PROBE] if self.source.kind == "torch" else [
            PRECISION_PROBE]
        found = [(probe, self.probe_path(probe, path), npz) for probe in probes]
        return [(probe, p, npz) for probe, p, npz in found if p is not None]

    def probe_path(self, target: str, path: str) -> str | None:
        """The path ``target``'s probe of a cell on ``path`` runs (None: it cannot)."""
        paths = self.paths_of(target)
        if isinstance(paths, Verdict) or (path not in paths and paths != [""]):
            return None
        return path if paths != [""] else ""

    def _probe(self, target: str, path: str, npz: str, same: str | None = None) -> bool | None:
        """Does ``target`` pass this cell — or, given ``same``, not fail with that
        signature (None: it was not judged)?"""
        probe_path = self.probe_path(target, path)
        if probe_path is None:
            return None
        verdict, _ = self.run(target, probe_path, npz)
        if verdict.status == "skipped" or reference_failure(verdict):
            return None
        return not verdict.failed or (same is not None and verdict.signature != same)

    def _culprit(self, target: str, path: str, npz: str, attribution: str) -> Culprit | None:
        if attribution == "conversion":
            verdict, arrays = self.run(EXACT_PROBE, path, npz)
            if not verdict.failed:
                return None
            judged = self.case(EXACT_PROBE, path, npz).options
            return by_outputs(self.outline(EXACT_PROBE, path), split_arrays(arrays, "ref:"),
                              split_arrays(arrays, "out:"),
                              judged.judging_precision(spec_of(EXACT_PROBE).precision))
        if self.source.kind == "torch" and not path:
            return None  # a torch target: no program whose ops could be named
        cell = self.case(target, path, npz)
        options = CaseOptions(plugins=tuple(self.plugins), intermediates=True)
        case = Case(cell.source, cell.source_kind, target, inputs_path=npz,
                    model_sha256=cell.model_sha256, inputs_sha256=cell.inputs_sha256,
                    options=options)
        outcome = evaluate(case, reference=EXACT_PROBE, isolator=self.isolator,
                           timeout=self.timeouts.predict)
        target_mid = split_arrays(outcome.arrays, "mid:")
        if not target_mid:
            return None
        return by_intermediates(self.outline(target, path), target_mid,
                                split_arrays(outcome.arrays, "refmid:"),
                                spec_of(target).precision)

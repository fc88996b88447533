"""Where a failing cell's divergence enters, and at which op.

Attribution answers "where does the divergence enter?" with two extra evaluations made
only when something fails, on the *same conversion path* as the failing cell:

* ``conversion`` — the converted program, evaluated exactly (``sim:fp64``), already
  disagrees with torch: the converter emitted different math. An integer result the
  program returns as a float is the converter's too: it routed integer math through a
  float, which ``sim:fp64`` hides only by being wide (an int32 off by one past 2^24 at
  fp32 is the conversion's, not fp32's);
* ``precision`` — exact evaluation agrees, a careful fp16 evaluation (``sim:fp16``)
  does not: a graph-level range hazard any fp16 device would hit;
* ``device`` — both agree; only the device (or its simulated profile) disagrees. A
  program the exact evaluation runs but a target refuses to load is the device's too:
  the runtime's rules (:mod:`nebisect.mil.semantics.rules`) are not precision.

The culprit (:mod:`nebisect.detect.culprit`) costs one more evaluation, recording
intermediates; a ``conversion`` culprit two, the exact program's intermediates and torch's
own on the same conversion path (:mod:`nebisect.sources.torch_graph`), once per path and
input set whatever the targets that show it. Every probe is a cell of the workbench, so it
is cached across targets and a probe the matrix already ran is never run twice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nebisect.case import Case, CaseOptions
from nebisect.detect.culprit import (
    by_intermediates,
    by_outputs,
    by_torch,
    diverging_outputs,
    first_nonfinite,
)
from nebisect.evaluate.judge import evaluate, split_arrays
from nebisect.evaluate.programs import ProgramOutline
from nebisect.evaluate.workbench import CellKey, Workbench, reference_failure
from nebisect.oracle import exact_dtype
from nebisect.search.records import Culprit
from nebisect.sources.convert import CONVERSION
from nebisect.sources.torch_graph import torch_intermediates
from nebisect.targets.spec import REFERENCE_SPEC, REFERENCE_TARGET, TargetSpec
from nebisect.verdict import Verdict, mismatch_signature

ATTRIBUTIONS = ("conversion", "precision", "device")
#: the divergences a probe explains by diverging at all (any other failure it explains
#: only by failing the same way)
SPREAD_SIGNATURES = tuple(mismatch_signature(kind) for kind in ("tolerance", "integer",
                                                                "shape", "nan-suppressed"))
#: the simulator targets that compute only with fp16 or fp32 rounding: a failure of
#: theirs that is no conversion bug is one of precision
PRECISION_TARGETS = (TargetSpec("sim", "fp16"), TargetSpec("sim", "fp16-naive"),
                     TargetSpec("sim", "fp32"))
PRECISION_PROBE = PRECISION_TARGETS[0]
EXACT_PROBE = REFERENCE_SPEC


def attribute(target: TargetSpec, verdict: Verdict, exact_ok: bool | None,
              fp16_ok: bool | None) -> str:
    """Where a failing cell's divergence enters (see the module docstring)."""
    if verdict.stage == "convert" or exact_ok is False:
        return "conversion"
    if verdict.status == "error" and verdict.stage == "load":
        return "device"
    if target in PRECISION_TARGETS:
        return "precision"
    if fp16_ok is False and target.precision == "fp16":
        return "precision"
    return "device"


@dataclass
class Attributor:
    """Explains the failing cells of one workbench; each explanation is cached."""

    bench: Workbench
    _explained: dict[CellKey, tuple[str, Culprit | None]] = field(default_factory=dict)
    #: the conversion culprit of each (path, inputs file): one for every target
    _converted: dict[tuple[str, str], Culprit | None] = field(default_factory=dict)

    def explain(self, key: CellKey, verdict: Verdict) -> tuple[str, Culprit | None]:
        """The attribution of a failing cell and its culprit op (None when no op can be
        named: an error before any output, or a target that records no intermediates)."""
        if key not in self._explained:
            attribution = self.attribution(key, verdict)
            culprit = None
            if verdict.status == "mismatch":
                culprit = self._culprit(key, attribution, verdict)
            self._explained[key] = attribution, culprit
        return self._explained[key]

    def attribution(self, key: CellKey, verdict: Verdict) -> str:
        """The attribution alone: at most two probes, both cached across targets.

        A tolerance miss is explained by a probe that diverges at all; a cliff (inf/NaN,
        a collapse), an error or a crash only by a probe that fails the same way: an
        fp16 overflow elsewhere in the graph does not explain a shape error, and a
        converter's wrong but finite math (``x.std()`` dividing by N) does not explain
        fp16 overflowing to inf at |x| ≈ 278 — that is precision's.
        """
        same = None if verdict.signature in SPREAD_SIGNATURES else verdict.signature
        exact_ok = (self._probe(EXACT_PROBE, key, same) if self.bench.source.ref.is_torch
                    else None)
        if exact_ok and verdict.signature == "mismatch:integer" and self._floats_for_integers(key):
            exact_ok = False
        fp16_ok = self._probe(PRECISION_PROBE, key, same)
        return attribute(key.target, verdict, exact_ok, fp16_ok)

    def probe_keys(self, path: str, npz: str) -> list[CellKey]:
        """The cells :meth:`attribution` may evaluate for a failing cell on ``path``."""
        probes = [EXACT_PROBE, PRECISION_PROBE] if self.bench.source.ref.is_torch else [
            PRECISION_PROBE]
        found = [(probe, self.probe_path(probe, path)) for probe in probes]
        return [CellKey(probe, p, npz) for probe, p in found if p is not None]

    def probe_path(self, target: TargetSpec, path: str) -> str | None:
        """The path ``target``'s probe of a cell on ``path`` runs (None: it cannot)."""
        paths = self.bench.paths_of(target)
        if isinstance(paths, Verdict) or (path not in paths and paths != [""]):
            return None
        return path if paths != [""] else ""

    def _probe(self, target: TargetSpec, key: CellKey, same: str | None = None) -> bool | None:
        """Does ``target`` pass the cell ``key`` — or, given ``same``, not fail with that
        signature (None: it was not judged)?"""
        probe_path = self.probe_path(target, key.path)
        if probe_path is None:
            return None
        verdict, _ = self.bench.evaluate_cell(target, probe_path, key.inputs)
        if verdict.status == "skipped" or reference_failure(verdict):
            return None
        return not verdict.failed or (same is not None and verdict.signature != same)

    def _floats_for_integers(self, key: CellKey) -> bool:
        """Does the converted program, evaluated exactly, return a float output where
        torch returns integers (or bools)?"""
        probe_path = self.probe_path(EXACT_PROBE, key.path)
        if probe_path is None:
            return False
        _, arrays = self.bench.evaluate_cell(EXACT_PROBE, probe_path, key.inputs)
        outputs = split_arrays(arrays, "out:")
        return any(exact_dtype(ref.dtype) and name in outputs
                   and not exact_dtype(outputs[name].dtype)
                   for name, ref in split_arrays(arrays, "ref:").items())

    def _culprit(self, key: CellKey, attribution: str, verdict: Verdict) -> Culprit | None:
        bench, target, path, npz = self.bench, key.target, key.path, key.inputs
        if attribution == "conversion":
            if (path, npz) not in self._converted:
                self._converted[path, npz] = self._conversion_culprit(path, npz)
            return self._converted[path, npz]
        if bench.source.ref.is_torch and not path:
            return None  # a torch target: no program whose ops could be named
        outcome = evaluate(self._intermediates_case(target, path, npz),
                           reference=REFERENCE_TARGET, isolator=bench.isolator,
                           timeout=bench.timeouts.predict, among=bench.needs(target))
        target_mid = split_arrays(outcome.arrays, "mid:")
        if not target_mid:
            return None
        graph, reference = bench.outline(target, path), split_arrays(outcome.arrays, "refmid:")
        found = by_intermediates(graph, target_mid, reference, target.precision,
                                 verdict.signature)
        if found is None and verdict.signature == "mismatch:nonfinite":
            # The reference computes the same inf/NaN (a package's own program): the
            # culprit is where the program's own values stop being finite.
            return first_nonfinite(graph, reference)
        return found

    def _intermediates_case(self, target: TargetSpec, path: str, npz: str, steps: int = 0) -> Case:
        """The case of a cell that records every intermediate value (over ``steps``
        steps: the cell's own when 0)."""
        cell = self.bench.case(target, path, npz)
        options = CaseOptions(plugins=tuple(self.bench.plugins), intermediates=True,
                              steps=steps or cell.options.steps)
        return Case(cell.ref, str(target), inputs_path=npz, model_sha256=cell.model_sha256,
                    inputs_sha256=cell.inputs_sha256, options=options)

    def _conversion_culprit(self, path: str, npz: str) -> Culprit | None:
        """Where the exact program on ``path`` first disagrees with torch at the inputs
        ``npz``: by torch's intermediates (:func:`by_torch`), else by the outputs."""
        bench = self.bench
        verdict, arrays = bench.evaluate_cell(EXACT_PROBE, path, npz)
        if not verdict.failed:
            return None
        graph = bench.outline(EXACT_PROBE, path)
        precision = bench.case(EXACT_PROBE, path, npz).options.judging_precision(
            EXACT_PROBE.precision)
        torch_outputs, program_outputs = split_arrays(arrays, "ref:"), split_arrays(arrays, "out:")
        diverging = [name for name, _ in diverging_outputs(graph, torch_outputs,
                                                           program_outputs, precision)]
        return self._torch_culprit(path, npz, graph, diverging, precision) or by_outputs(
            graph, torch_outputs, program_outputs, precision)

    def _torch_culprit(self, path: str, npz: str, graph: ProgramOutline,
                       diverging: list[str], precision: str) -> Culprit | None:
        """:func:`by_torch` on the exact program's intermediates and torch's, each
        recorded in a child; None for a stateful source (one call of torch's graph is
        not a decode loop), when no output diverges or when torch's intermediates could
        not be recorded."""
        bench = self.bench
        if not path or bench.source.states or not diverging:
            return None
        recorded = torch_intermediates(
            bench.source.location, npz, path, bench.reference.dtype or "fp64",
            isolator=bench.isolator, needs=CONVERSION, timeout=bench.timeouts.convert)
        if recorded is None:
            return None
        outcome = evaluate(self._intermediates_case(EXACT_PROBE, path, npz, steps=1),
                           reference=None, isolator=bench.isolator,
                           timeout=bench.timeouts.predict)
        return by_torch(graph, split_arrays(outcome.arrays, "mid:"), *recorded, diverging,
                        precision)

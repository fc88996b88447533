"""The run matrix: every target × every length, isolated, judged, attributed.

Attribution answers "where does the divergence enter?" with two extra evaluations
made only when something fails:

* ``conversion`` — the converted program, evaluated exactly (``sim:fp64``), already
  disagrees with torch: the converter emitted different math;
* ``precision`` — exact evaluation agrees, a careful fp16 evaluation (``sim:fp16``)
  does not: a graph-level range hazard any fp16 device would hit;
* ``device`` — both agree; only the device (or its simulated profile) disagrees.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nebisect.case import Case, load_npz, save_npz, sha256_arrays, sha256_path
from nebisect.inputs import check, generate, lengths_for
from nebisect.isolate import Isolator
from nebisect.runner import evaluate
from nebisect.source import Source
from nebisect.targets import load_plugins, spec_of
from nebisect.verdict import Verdict

ATTRIBUTIONS = ("conversion", "precision", "device")
PRECISION_PROBE = "sim:fp16"
EXACT_PROBE = "sim:fp64"


@dataclass
class Row:
    """One cell of the matrix: a target at a length, its verdict and attribution."""

    target: str
    length: int
    verdict: Verdict
    attribution: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "length": self.length, "attribution": self.attribution,
                "verdict": self.verdict.to_dict()}


@dataclass
class RunReport:
    source: str
    reference: str
    rows: list[Row] = field(default_factory=list)
    conversions: dict[str, Verdict] = field(default_factory=dict)
    #: Why the run stopped before every cell was evaluated ("interrupted by SIGTERM").
    interrupted: str = ""

    @property
    def failed(self) -> bool:
        return any(r.verdict.failed for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "reference": self.reference,
            "failed": self.failed,
            "conversions": {k: v.to_dict() for k, v in self.conversions.items()},
            "rows": [r.to_dict() for r in self.rows],
            **({"interrupted": self.interrupted} if self.interrupted else {}),
        }


def attribute(target: str, verdict: Verdict, exact_ok: bool | None, fp16_ok: bool | None) -> str:
    """Where a failing row's divergence enters (see the module docstring)."""
    if verdict.stage == "convert" or exact_ok is False:
        return "conversion"
    if target in (PRECISION_PROBE, "sim:fp16-naive", "sim:fp32"):
        return "precision"
    if fp16_ok is False and spec_of(target).precision == "fp16":
        return "precision"
    return "device"


@dataclass
class MatrixRunner:
    """Runs a source over targets × lengths with one isolator; conversion per precision.

    ``convert`` maps (source, precision, workdir) → (package path or None, verdict);
    it runs in isolation (``nebisect.convert``) for torch sources. ``report`` is the
    report being filled: after an interruption, it holds the rows evaluated until then.
    """

    source: Source
    targets: list[str]
    workdir: Path
    isolator: Isolator
    reference: str = ""
    timeout: float = 120.0
    convert: Callable[[Source, str, Path, Isolator], tuple[Path | None, Verdict]] | None = None
    plugins: list[str] = field(default_factory=list)
    progress: Callable[[str], None] = lambda _msg: None
    _packages: dict[str, Path | None] = field(default_factory=dict)
    _conversions: dict[str, Verdict] = field(default_factory=dict)
    _npz: dict[int, str] = field(default_factory=dict)
    report: RunReport = field(init=False)

    def __post_init__(self) -> None:
        self.reference = self.reference or self.source.reference
        self.report = RunReport(self.source.location, self.reference)
        load_plugins(self.plugins)

    def run(self, lengths: tuple[int, ...], inputs_path: str = "") -> RunReport:
        report = self.report = RunReport(self.source.location, self.reference)
        for length, npz in self._inputs(lengths, inputs_path):
            for target in self.targets:
                self.progress(f"{target} at length {length}")
                report.rows.append(self._row(report, target, length, npz))
        self._attribute(report)
        return report

    def _inputs(self, lengths: tuple[int, ...], inputs_path: str) -> list[tuple[int, str]]:
        if inputs_path:
            arrays = load_npz(inputs_path)
            check(self.source.inputs, arrays)
            self._npz[0] = inputs_path
            return [(0, inputs_path)]
        chosen = []
        for length in lengths_for(self.source.inputs, lengths):
            arrays = generate(self.source.inputs, length)
            path = self.workdir / f"inputs-{length}.npz"
            save_npz(path, arrays)
            self._npz[length] = str(path)
            chosen.append((length, str(path)))
        return chosen

    def _case(self, target: str, npz: str) -> Case | Verdict:
        """The case for ``target``, or the convert-stage verdict that prevents it."""
        options: dict[str, Any] = {"plugins": self.plugins} if self.plugins else {}
        kind, location = self.source.kind, self.source.location
        if self.source.kind == "torch":
            options["reference_source"] = ["torch", self.source.location]
            if not target.startswith("torch:"):
                package, verdict = self._package(spec_of(target).precision)
                if package is None:
                    return verdict
                kind, location = "mlpackage", str(package)
                if spec_of(target).precision == "fp64":
                    # The converter stores weights and constants as fp32, so even a perfect
                    # conversion differs from torch fp64 by fp32 rounding: judge at fp32.
                    options["judge_precision"] = "fp32"
        model_hash = sha256_path(location) if kind == "mlpackage" else ""
        return Case(location, kind, target, inputs_path=npz, model_sha256=model_hash,
                    inputs_sha256=sha256_arrays(load_npz(npz)), options=options)

    def _package(self, precision: str) -> tuple[Path | None, Verdict]:
        """Convert once per conversion precision (fp16 → FLOAT16, else FLOAT32)."""
        key = "fp16" if precision == "fp16" else "fp32"
        if key not in self._packages:
            assert self.convert is not None, "torch sources need a converter"
            package, verdict = self.convert(self.source, key, self.workdir, self.isolator)
            self._packages[key] = package
            self._conversions[key] = verdict
        return self._packages[key], self._conversions[key]

    def _row(self, report: RunReport, target: str, length: int, npz: str) -> Row:
        started = time.perf_counter()
        case = self._case(target, npz)
        report.conversions.update(self._conversions)
        if isinstance(case, Verdict):
            return Row(target, length, case)
        verdict = evaluate(case, reference=self.reference, isolator=self.isolator,
                           timeout=self.timeout).verdict
        verdict.timings.setdefault("total", time.perf_counter() - started)
        return Row(target, length, verdict)

    def _attribute(self, report: RunReport) -> None:
        """Fill attributions of failing rows, probing each length at most once."""
        probes: dict[tuple[str, int], bool | None] = {}
        by_cell = {(r.target, r.length): r for r in report.rows}
        for row in report.rows:
            if not row.verdict.failed:
                continue
            exact_ok = self._probe(EXACT_PROBE, row, probes, by_cell) if (
                self.source.kind == "torch") else None
            fp16_ok = self._probe(PRECISION_PROBE, row, probes, by_cell)
            row.attribution = attribute(row.target, row.verdict, exact_ok, fp16_ok)

    def _probe(
        self,
        target: str,
        row: Row,
        probes: dict[tuple[str, int], bool | None],
        by_cell: dict[tuple[str, int], Row],
    ) -> bool | None:
        key = (target, row.length)
        if key in by_cell:
            return not by_cell[key].verdict.failed
        if key not in probes:
            case = self._case(target, self._npz[row.length])
            if isinstance(case, Verdict):
                probes[key] = None
            else:
                probes[key] = not evaluate(case, reference=self.reference,
                                           isolator=self.isolator,
                                           timeout=self.timeout).verdict.failed
        return probes[key]

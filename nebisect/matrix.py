"""The run matrix: every target × every length, isolated, judged, attributed.

Attribution answers "where does the divergence enter?" with two extra evaluations
made only when something fails:

* ``conversion`` — the converted program, evaluated exactly (``sim:fp64``), already
  disagrees with torch: the converter emitted different math;
* ``precision`` — exact evaluation agrees, a careful fp16 evaluation (``sim:fp16``)
  does not: a graph-level range hazard any fp16 device would hit;
* ``device`` — both agree; only the device (or its simulated profile) disagrees.

A reference that fails (the ``--reference`` target, or torch eager, crashes, raises or
hangs while computing the expected outputs) is not the target's failure: it gets a row
of its own (role ``reference``, its own signature), and the target rows it should have
judged say they were not judged (``skipped``). The run still fails: something broke.
"""

from __future__ import annotations

import os
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
from nebisect.sources.plugins import use_plugins
from nebisect.targets import spec_of
from nebisect.timeouts import Timeouts
from nebisect.verdict import Verdict

ATTRIBUTIONS = ("conversion", "precision", "device")
PRECISION_PROBE = "sim:fp16"
EXACT_PROBE = "sim:fp64"
#: The stage a case's verdict names when its reference, not its target, failed.
REFERENCE_STAGE = "reference"


@dataclass
class Row:
    """One cell of the matrix: a target at a length, its verdict and attribution.

    ``role`` is ``reference`` for the row of a reference that failed at this length.
    """

    target: str
    length: int
    verdict: Verdict
    attribution: str = ""
    role: str = "target"

    def to_dict(self) -> dict[str, Any]:
        return {"target": self.target, "length": self.length, "role": self.role,
                "attribution": self.attribution, "verdict": self.verdict.to_dict()}


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

    @property
    def reference_failed(self) -> bool:
        return any(r.role == "reference" for r in self.rows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "reference": self.reference,
            "failed": self.failed,
            "reference_failed": self.reference_failed,
            "conversions": {k: v.to_dict() for k, v in self.conversions.items()},
            "rows": [r.to_dict() for r in self.rows],
            **({"interrupted": self.interrupted} if self.interrupted else {}),
        }


def reference_failure(verdict: Verdict) -> bool:
    """True when the case failed in its reference, so the target was never judged."""
    return verdict.failed and verdict.stage == REFERENCE_STAGE


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

    ``convert`` maps (source, precision, workdir, isolator, timeout=) → (package path or
    None, verdict); it runs in isolation (``nebisect.convert``) for torch sources.
    ``plugins`` are described in isolated children (never imported here) and named in
    every case, whose child imports them. ``report`` is the
    report being filled: after an interruption, it holds the rows evaluated until then.
    """

    source: Source
    targets: list[str]
    workdir: Path
    isolator: Isolator
    reference: str = ""
    timeouts: Timeouts = field(default_factory=Timeouts)
    convert: Callable[..., tuple[Path | None, Verdict]] | None = None
    plugins: list[str] = field(default_factory=list)
    progress: Callable[[str], None] = lambda _msg: None
    _packages: dict[str, Path | None] = field(default_factory=dict)
    _conversions: dict[str, Verdict] = field(default_factory=dict)
    _npz: dict[int, str] = field(default_factory=dict)
    report: RunReport = field(init=False)

    def __post_init__(self) -> None:
        self.reference = self.reference or self.source.reference
        self.report = RunReport(self.source.location, self.reference)
        self.plugins = use_plugins(self.plugins, timeout=self.timeouts.load,
                                   isolator=self.isolator)

    def run(self, lengths: tuple[int, ...], inputs_path: str = "") -> RunReport:
        report = self.report = RunReport(self.source.location, self.reference)
        for length, npz in self._inputs(lengths, inputs_path):
            # Rows go into the report as they finish, so an interrupted run keeps them.
            first = len(report.rows)
            for target in self.targets:
                self.progress(f"{target} at length {length}")
                report.rows.append(self._row(report, target, length, npz))
            report.rows[first:] = self._separate_reference(report.rows[first:], length)
        self._attribute(report)
        return report

    def _separate_reference(self, rows: list[Row], length: int) -> list[Row]:
        """The reference's failure as its own row; the rows it left unjudged say so."""
        failure = next((r.verdict for r in rows if reference_failure(r.verdict)), None)
        if failure is None:
            return rows
        reference = Verdict.from_dict({**failure.to_dict(), "target": self.reference})
        reference.message = f"reference failed: {failure.message}"
        separated = [Row(self.reference, length, reference, role="reference")]
        for row in rows:
            if reference_failure(row.verdict):
                row.verdict = Verdict(
                    "skipped", REFERENCE_STAGE, target=row.target, timings=row.verdict.timings,
                    message=f"not judged: the reference {self.reference} failed "
                    f"({failure.signature})",
                )
            separated.append(row)
        return separated

    def _inputs(self, lengths: tuple[int, ...], inputs_path: str) -> list[tuple[int, str]]:
        if inputs_path:
            inputs_path = os.path.abspath(inputs_path)
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
            package, verdict = self.convert(self.source, key, self.workdir, self.isolator,
                                            timeout=self.timeouts.convert)
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
                           timeout=self.timeouts.predict).verdict
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
            known = by_cell[key].verdict
            return None if known.status == "skipped" else not known.failed
        if key not in probes:
            case = self._case(target, self._npz[row.length])
            verdict = case if isinstance(case, Verdict) else evaluate(
                case, reference=self.reference, isolator=self.isolator,
                timeout=self.timeouts.predict).verdict
            probes[key] = (None if isinstance(case, Verdict) or reference_failure(verdict)
                           else not verdict.failed)
        return probes[key]

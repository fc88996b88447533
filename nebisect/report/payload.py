"""The records a report is made of; run, bisect, fuzz and replay fill them in.

Every record is a dataclass read and written by the codec (:mod:`nebisect.codec`) in
its strict form: floats may be NaN or ±inf (a collapsed output is exactly what a report
must show) and are written to JSON as the strings ``"NaN"``, ``"Infinity"``,
``"-Infinity"`` so report.json stays strict JSON (:func:`to_jsonable`). The typed float
fields read back as floats.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from nebisect.codec import Form, Record, to_jsonable
from nebisect.search.divergence import OpError
from nebisect.targets.spec import REFERENCE_TARGET
from nebisect.verdict import Verdict

REPORT_KINDS = ("run", "bisect", "fuzz", "replay", "lint", "atlas")

__all__ = ["REPORT_KINDS", "CliffSweep", "Divergence", "MatrixCell", "NamedVerdict",
           "ReportFinding", "ReportPayload", "RunMatrix", "Table", "WorstElement",
           "to_jsonable"]


class _Record(Record):
    """A report record: the codec's strict form (non-finite floats as strings)."""

    json_form: ClassVar[Form] = Form(strict_floats=True)


@dataclass
class Table(_Record):
    """A plain table: cells are strings, numbers, booleans or None."""

    title: str
    columns: list[str]
    rows: list[list[Any]]


@dataclass
class CliffSweep(_Record):
    """Output versus a swept input, with the reference and the localized cliff.

    ``bracket`` is the pair of adjacent fp16 values the transition lies between,
    ``bracket_outputs`` the target's output at each; ``predicted_boundary`` is the
    analytic overflow point (e.g. log(65504/32)) named by ``predicted_label``;
    ``series`` the outputs of other targets at the same ``x`` (``run``'s cliff plot
    draws one line per target).
    """

    title: str
    x: list[float]
    output: list[float]
    reference: list[float]
    target: str = ""
    reference_target: str = REFERENCE_TARGET
    bracket: list[float] | None = None
    bracket_outputs: list[float] | None = None
    predicted_boundary: float | None = None
    predicted_label: str = ""
    predictions: int | None = None
    x_label: str = "x"
    y_label: str = "output"
    series: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        lengths = {len(self.output), len(self.reference), *map(len, self.series.values())}
        if lengths != {len(self.x)}:
            raise ValueError("a sweep needs as many outputs and references as x values")
        if self.bracket is not None and len(self.bracket) != 2:
            raise ValueError("a cliff bracket is two x values")


@dataclass
class Divergence(_Record):
    """Per-op errors in topological order and the first op that breaks the oracle."""

    title: str
    ops: list[OpError]
    first_divergent: str | None = None
    target: str = ""
    unit: str = "ULP"
    threshold: float | None = None
    evaluations: int | None = None


@dataclass
class MatrixCell(_Record):
    row: str
    column: str
    status: str
    text: str = ""
    detail: str = ""


@dataclass
class RunMatrix(_Record):
    """A rows × columns grid of verdict statuses (``nebisect run``: target × length)."""

    title: str
    rows: list[str]
    columns: list[str]
    cells: list[MatrixCell]
    row_label: str = "target"
    column_label: str = "length"

    @classmethod
    def from_verdicts(
        cls, title: str, entries: Iterable[tuple[str, str, Verdict]], **labels: str
    ) -> RunMatrix:
        """Build the grid from (row, column, verdict); the cell text is the verdict's
        mismatch kind or status, its hover text the verdict message."""
        cells, rows, columns = [], [], []
        for row, column, verdict in entries:
            rows.append(row)
            columns.append(column)
            kind = verdict.signature.split(":", 1)[1] if verdict.status == "mismatch" else ""
            cells.append(MatrixCell(row, column, verdict.status, kind or verdict.status,
                                    verdict.message))
        return cls(title, list(dict.fromkeys(rows)), list(dict.fromkeys(columns)), cells,
                   **labels)

    def cell(self, row: str, column: str) -> MatrixCell | None:
        return next((c for c in self.cells if c.row == row and c.column == column), None)


@dataclass
class NamedVerdict(_Record):
    """A verdict with the name it is reported under (a test case name in JUnit)."""

    name: str
    verdict: Verdict
    group: str = ""


@dataclass
class WorstElement(_Record):
    """A finding in numbers on one target and conversion path, at the smallest input set
    failing there: torch's value (the float64 reference) and the converted program's at
    the element the comparison reports (``output``: the output's name and index), the
    error in absolute terms and in ULPs of ``precision``; ``needed`` ULPs would have
    passed where the oracle ``allowed`` fewer. ``inputs`` names the input set in words."""

    target: str
    path: str
    inputs: str
    output: str
    kind: str
    reference: float
    converted: float
    abs_error: float
    ulps: float
    precision: str
    needed: float
    allowed: float


@dataclass
class ReportFinding(_Record):
    """One root cause as a report lists it, above the plots: its title (worded like a
    bug report's), symptom and attribution, its smallest trigger, where it shows
    (target → conversion path → the smallest failing input set, or ``pass``) and the
    command that takes it further.

    What an upstream issue adds (:mod:`nebisect.report.issue`): the title in a converter
    maintainer's words (``issue_title``), the culprit op (``op_type``, ``culprit``) and
    how it was found (``located``), the conversion paths (``paths``, as torch names
    them) and targets it shows on, an error's stage and text, its numbers (``worst``)
    and a standalone script that shows it (``repro``; ``repro_note`` says what the
    script runs on, or why there is none)."""

    number: int
    title: str
    symptom: str
    attribution: str
    trigger: str
    shows: dict[str, dict[str, str]] = field(default_factory=dict)
    command: str = ""
    issue_title: str = ""
    op_type: str = ""
    culprit: str = ""
    located: str = ""
    paths: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    stage: str = ""
    message: str = ""
    worst: list[WorstElement] = field(default_factory=list)
    repro: str = ""
    repro_note: str = ""


@dataclass
class ReportPayload(_Record):
    """Everything one report shows; sections left empty are omitted from the HTML."""

    title: str
    summary: dict[str, Any] = field(default_factory=dict)
    findings: list[ReportFinding] = field(default_factory=list)
    verdicts: list[NamedVerdict] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    sweeps: list[CliffSweep] = field(default_factory=list)
    divergences: list[Divergence] = field(default_factory=list)
    matrices: list[RunMatrix] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the versions and platform the report was made with (coremltools, torch, numpy,
    #: python, os, …), and each target named in words a converter maintainer knows
    environment: dict[str, str] = field(default_factory=dict)
    target_words: dict[str, str] = field(default_factory=dict)

    def junit_results(self) -> list[tuple[str, Verdict]]:
        """The verdicts as (name, Verdict) pairs, the input of the JUnit writer."""
        return [(v.name, v.verdict) for v in self.verdicts]

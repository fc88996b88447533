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

from nebisect.case import REFERENCE_TARGET
from nebisect.codec import Form, Record, to_jsonable
from nebisect.verdict import Verdict

REPORT_KINDS = ("run", "bisect", "fuzz", "replay", "lint", "atlas")

__all__ = ["REPORT_KINDS", "CliffSweep", "Divergence", "MatrixCell", "NamedVerdict",
           "OpError", "ReportFinding", "ReportPayload", "RunMatrix", "Table", "to_jsonable"]


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
class OpError(_Record):
    """One op's output error against the reference, in the divergence's unit."""

    index: int
    name: str
    op_type: str
    error: float
    passed: bool


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
class ReportFinding(_Record):
    """One root cause as a report lists it, above the plots: its title (worded like a
    bug report's), symptom and attribution, its smallest trigger, where it shows
    (target → conversion path → the smallest failing input set, or ``pass``) and the
    command that takes it further."""

    number: int
    title: str
    symptom: str
    attribution: str
    trigger: str
    shows: dict[str, dict[str, str]] = field(default_factory=dict)
    command: str = ""


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

    def junit_results(self) -> list[tuple[str, Verdict]]:
        """The verdicts as (name, Verdict) pairs, the input of the JUnit writer."""
        return [(v.name, v.verdict) for v in self.verdicts]

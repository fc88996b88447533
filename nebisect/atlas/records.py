"""The atlas's records: one :class:`AtlasEntry` per op sample, the :class:`Atlas` of a sweep.

An entry is what ``run`` found for one sample, read down to the atlas's grid: per
conversion path, whether it converts and the verdict of each column (:data:`ATLAS_COLUMNS`),
and the run's findings — one per root cause, with its title, symptom, attribution and
culprit op exactly as ``run`` reports them. The atlas JSON is these records through the
codec, with a schema name and version.

A **failure** of an entry (:meth:`AtlasEntry.failures`) is read off its grid, column by
column down the precisions: a conversion error, the exact program (``fp64``) disagreeing
with torch — the converter's math —, or a column failing where the one before it passed
or failed otherwise (fp32 rounding, fp16 range, the Neural Engine). A column that fails
as the one before it inherits that failure. torch refusing a path's program (``not
exportable``, ``not traceable``: :mod:`~nebisect.sources.frontend`) is no failure: the
program never reached the converter. Each failure lists the paths it shows on:
``var(correction=2)`` wrong in the exact program on ``trace`` only is one failure,
``std(x)`` wrong on both paths another, whatever ``run``'s root-cause merging makes of
the fp16 overflow beside them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from nebisect.codec import Form, Record
from nebisect.sources.frontend import is_refusal
from nebisect.targets.spec import REFERENCE_SPEC, TargetSpec
from nebisect.verdict import normalize_message

ATLAS_SCHEMA = "nebisect.atlas"
ATLAS_SCHEMA_VERSION = 1

#: the atlas's columns and the target each reads (``converts`` reads the conversion)
ATLAS_COLUMNS: dict[str, TargetSpec | None] = {
    "converts": None, "fp64": REFERENCE_SPEC, "fp32": TargetSpec("sim", "fp32"),
    "fp16": TargetSpec("sim", "fp16"), "ane": TargetSpec("sim", "ane")}
#: a cell of a path that did not convert
NOT_RUN = "-"
#: the setting that says what a sweep's samples are, and its value for pattern programs
SAMPLES_SETTING, PATTERNS = "samples", "patterns"
#: cell values that are not failures
PASSING = ("ok", "pass", "skipped", NOT_RUN)
#: how a ``converts`` cell of a path that did not convert begins
ERROR_PREFIX = "error: "


@dataclass
class AtlasFinding(Record):
    """One root cause ``run`` found for a sample: its title and classes, the conversion
    paths it shows on and the message of its smallest trigger."""

    title: str
    symptom: str
    attribution: str
    op_type: str
    paths: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    message: str = ""


@dataclass
class AtlasEntry(Record):
    """One sample judged: ``cells`` maps conversion path → column → verdict signature
    (``pass``, ``mismatch:tolerance``, ``error:convert:…``, :data:`NOT_RUN`);
    ``skipped`` says why the sample was not judged (its reference fails in torch, its
    factory cannot be described); ``digest`` is its source's hash (the cache key's
    part that is the sample)."""

    json_form: ClassVar[Form] = Form(omit_defaults=("skipped",))

    op: str
    index: str
    call: str
    digest: str
    cells: dict[str, dict[str, str]] = field(default_factory=dict)
    findings: list[AtlasFinding] = field(default_factory=list)
    seconds: float = 0.0
    #: conversion attempts the judging made (each path at each precision it needs)
    conversions: int = 0
    skipped: str = ""

    @property
    def failed(self) -> bool:
        return bool(self.findings) or bool(self.failures())

    def failures(self) -> dict[str, list[str]]:
        """``column: signature`` → the paths it shows on (see the module docstring)."""
        found: dict[str, list[str]] = {}
        for path, row in self.cells.items():
            before = ""
            for column in ATLAS_COLUMNS:
                value = row.get(column, NOT_RUN)
                if value in PASSING or refused(value):
                    before = ""
                    continue
                if value != before:
                    found.setdefault(f"{column}: {_normalized(value)}", []).append(path)
                before = value
        return found


def refused(value: str) -> bool:
    """Is a cell's value torch refusing the path's program (no converter failure)?"""
    return value.startswith(ERROR_PREFIX) and is_refusal(value[len(ERROR_PREFIX):])


def _normalized(value: str) -> str:
    """A cell's value as failures are keyed: a conversion error's message normalized
    (:func:`~nebisect.verdict.normalize_message`: ``Op "10"`` and ``Op "9"`` are one
    error), whatever the entry's cache kept."""
    return (ERROR_PREFIX + normalize_message(value[len(ERROR_PREFIX):])
            if value.startswith(ERROR_PREFIX) else value)


@dataclass
class Atlas(Record):
    """A sweep: the environment it ran in (the versions an atlas is diffed across), its
    settings, every entry in sweep order, the samples each op could not make and why,
    how many entries were computed rather than read from the cache, and the axes each
    op's samples covered (dtypes, and how they were moved:
    :func:`~nebisect.atlas.plan.covered_axes`)."""

    json_form: ClassVar[Form] = Form(schema=(ATLAS_SCHEMA, ATLAS_SCHEMA_VERSION))

    environment: dict[str, str]
    settings: dict[str, str]
    entries: list[AtlasEntry] = field(default_factory=list)
    unsampled: dict[str, list[str]] = field(default_factory=dict)
    computed: int = 0
    seconds: float = 0.0
    covered: dict[str, list[str]] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return any(e.failed for e in self.entries)

    @property
    def ops(self) -> list[str]:
        return list(dict.fromkeys(e.op for e in self.entries))

    @property
    def of_patterns(self) -> bool:
        """The samples are generated pattern programs (``atlas --patterns``)."""
        return self.settings.get(SAMPLES_SETTING) == PATTERNS

    def distinct_failures(self) -> dict[tuple[str, str, tuple[str, ...]], list[AtlasEntry]]:
        """Failures by (op, ``column: signature``, paths), each with the entries that
        show it, first first: what a maintainer would file one issue for. In a sweep of
        pattern programs one converter bug shows in every program that uses its
        pattern: failures are told apart by signature and paths alone, and named after
        the first program that shows them."""
        across = self.of_patterns
        first: dict[tuple[str, tuple[str, ...]], str] = {}
        found: dict[tuple[str, str, tuple[str, ...]], list[AtlasEntry]] = {}
        for entry in self.entries:
            for failure, paths in entry.failures().items():
                op = first.setdefault((failure, tuple(paths)), entry.op) if across else entry.op
                found.setdefault((op, failure, tuple(paths)), []).append(entry)
        return found

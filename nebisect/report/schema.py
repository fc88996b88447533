"""The documented schema of ``report.json`` (JSON Schema, draft 2020-12).

report.json, schema version 1 — one object:

``schema``            always ``"nebisect.report"``
``schema_version``    1; bumped on any incompatible change (fields are only added
                      within a version)
``kind``              ``run`` | ``bisect`` | ``fuzz`` | ``replay`` | ``lint`` | ``atlas``
``created``           ISO-8601 UTC time the report was written
``nebisect_version``  the writing nebisect's version
``title``             one line
``summary``           free-form key → scalar/list/dict facts (source, targets, counts,
                      exit status) shown at the top of the HTML
``findings``          [{number, title, symptom, attribution, trigger, shows: {target:
                      {path: input set | "pass"}}, command}] — one per root cause, most
                      severe first (``run``); shown above the plots. A run's add what
                      an upstream issue needs (``run --markdown``): issue_title,
                      op_type, culprit, located, paths, targets, stage, message,
                      worst: [{target, path, inputs, output, kind, reference,
                      converted, abs_error, ulps, precision, needed, allowed}], repro,
                      repro_note
``verdicts``          [{name, group, verdict}] — ``verdict`` is
                      :class:`nebisect.verdict.Verdict` as a dict (status, stage,
                      signature, message, metrics, stderr_tail, provenance, timings,
                      placement, target)
``tables``            [{title, columns: [str], rows: [[cell]]}]
``sweeps``            cliff sweeps: {title, x, output, reference: [number], target,
                      reference_target, bracket: [lo, hi] | null, bracket_outputs,
                      predicted_boundary, predicted_label, predictions, x_label, y_label,
                      series: {target: [number]} — other targets' outputs at x}
``divergences``       first-divergence charts: {title, ops: [{index, name, op_type,
                      error, passed}], first_divergent, target, unit, threshold,
                      evaluations}
``matrices``          run matrices: {title, rows, columns, cells: [{row, column, status,
                      text, detail}], row_label, column_label}
``notes``             [str]
``environment``       {name: version}: coremltools, torch, numpy, python, os, … (``run``)
``target_words``      {target: what it is, in a converter maintainer's words} (``run``)

Numbers that are NaN or ±inf are written as the strings ``"NaN"``, ``"Infinity"``,
``"-Infinity"`` (strict JSON has no such numbers).
"""

from __future__ import annotations

from typing import Any

SCHEMA_NAME = "nebisect.report"
REPORT_SCHEMA_VERSION = 1

_NUMBER: dict[str, Any] = {
    "anyOf": [{"type": "number"}, {"enum": ["NaN", "Infinity", "-Infinity"]}]
}
_OPTIONAL_NUMBER: dict[str, Any] = {"anyOf": [*_NUMBER["anyOf"], {"type": "null"}]}
_NUMBERS: dict[str, Any] = {"type": "array", "items": _NUMBER}
_STRINGS: dict[str, Any] = {"type": "array", "items": {"type": "string"}}
_STATUS: dict[str, Any] = {
    "enum": ["pass", "crash", "error", "timeout", "oom", "mismatch", "unrouted", "skipped"]
}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


_VERDICT = _object(
    {
        "status": _STATUS, "stage": {"type": "string"}, "signature": {"type": "string"},
        "message": {"type": "string"}, "metrics": {"type": "object"},
        "stderr_tail": {"type": "string"}, "provenance": {"type": "object"},
        "timings": {"type": "object"}, "placement": {"type": "object"},
        "target": {"type": "string"},
    },
    ["status", "stage", "signature", "message"],
)

#: one root cause of a run (:class:`nebisect.detect.causes.RunFinding`): what ``run --json``
#: lists under ``findings``, most severe first
RUN_FINDING: dict[str, Any] = _object(
    {
        "number": {"type": "integer", "minimum": 1}, "title": {"type": "string"},
        "attribution": {"enum": ["conversion", "precision", "device", ""]},
        "attributions": {"type": "array", "items": {"type": "string"}},
        "op_type": {"type": "string"},
        "symptom": {"enum": ["crash", "timeout", "oom", "error", "nonfinite", "collapse",
                             "shape", "integer", "tolerance", "unrouted"]},
        "severity": {"type": "integer", "minimum": 0},
        "stage": {"type": "string"}, "message": {"type": "string"},
        "targets": {"type": "array", "items": {"type": "string"}, "minItems": 1},
        "paths": {"type": "array", "items": {"type": "string"}},
        "smallest": _object({"family": {"type": "string"}, "label": {"type": "string"}},
                            ["family", "label"]),
        "shows": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": {"type": "string"}}},
        "cliffs": {"type": "array", "items": _object(
            {"target": {"type": "string"}, "family": {"type": "string"},
             "path": {"type": "string"}, "lo": _NUMBER, "hi": _NUMBER,
             "complete": {"type": "boolean"}},
            ["target", "family", "lo", "hi"])},
        "groups": {"type": "array", "items": {"type": "object"}, "minItems": 1},
    },
    ["number", "title", "attribution", "op_type", "symptom", "severity", "targets",
     "smallest", "shows", "groups"],
)
#: the ``findings`` array of ``run --json``
RUN_FINDINGS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "nebisect run --json findings", "type": "array", "items": RUN_FINDING,
}

REPORT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "nebisect report.json",
    **_object(
        {
            "schema": {"const": SCHEMA_NAME},
            "schema_version": {"const": REPORT_SCHEMA_VERSION},
            "kind": {"enum": ["run", "bisect", "fuzz", "replay", "lint", "atlas"]},
            "created": {"type": "string"},
            "nebisect_version": {"type": "string"},
            "title": {"type": "string"},
            "summary": {"type": "object"},
            "findings": {"type": "array", "items": _object(
                {"number": {"type": "integer"}, "title": {"type": "string"},
                 "symptom": {"type": "string"}, "attribution": {"type": "string"},
                 "trigger": {"type": "string"},
                 "shows": {"type": "object"}, "command": {"type": "string"},
                 "issue_title": {"type": "string"}, "op_type": {"type": "string"},
                 "culprit": {"type": "string"}, "located": {"type": "string"},
                 "paths": _STRINGS, "targets": _STRINGS, "stage": {"type": "string"},
                 "message": {"type": "string"},
                 "worst": {"type": "array", "items": _object(
                     {"target": {"type": "string"}, "path": {"type": "string"},
                      "inputs": {"type": "string"}, "output": {"type": "string"},
                      "kind": {"type": "string"}, "reference": _NUMBER,
                      "converted": _NUMBER, "abs_error": _NUMBER, "ulps": _NUMBER,
                      "precision": {"type": "string"}, "needed": _NUMBER,
                      "allowed": _NUMBER},
                     ["target", "path", "output", "reference", "converted"])},
                 "repro": {"type": "string"}, "repro_note": {"type": "string"}},
                ["number", "title", "symptom", "attribution", "trigger", "shows"],
            )},
            "verdicts": {"type": "array", "items": _object(
                {"name": {"type": "string"}, "group": {"type": "string"},
                 "verdict": _VERDICT},
                ["name", "verdict"],
            )},
            "tables": {"type": "array", "items": _object(
                {"title": {"type": "string"},
                 "columns": {"type": "array", "items": {"type": "string"}},
                 "rows": {"type": "array", "items": {"type": "array"}}},
                ["title", "columns", "rows"],
            )},
            "sweeps": {"type": "array", "items": _object(
                {"title": {"type": "string"}, "x": _NUMBERS, "output": _NUMBERS,
                 "reference": _NUMBERS, "target": {"type": "string"},
                 "reference_target": {"type": "string"},
                 "bracket": {"anyOf": [{**_NUMBERS, "minItems": 2, "maxItems": 2},
                                       {"type": "null"}]},
                 "bracket_outputs": {"anyOf": [_NUMBERS, {"type": "null"}]},
                 "predicted_boundary": _OPTIONAL_NUMBER,
                 "predicted_label": {"type": "string"},
                 "predictions": {"type": ["integer", "null"]},
                 "x_label": {"type": "string"}, "y_label": {"type": "string"},
                 "series": {"type": "object", "additionalProperties": _NUMBERS}},
                ["title", "x", "output", "reference"],
            )},
            "divergences": {"type": "array", "items": _object(
                {"title": {"type": "string"},
                 "ops": {"type": "array", "items": _object(
                     {"index": {"type": "integer"}, "name": {"type": "string"},
                      "op_type": {"type": "string"}, "error": _NUMBER,
                      "passed": {"type": "boolean"}},
                     ["index", "name", "op_type", "error", "passed"],
                 )},
                 "first_divergent": {"type": ["string", "null"]},
                 "target": {"type": "string"}, "unit": {"type": "string"},
                 "threshold": _OPTIONAL_NUMBER,
                 "evaluations": {"type": ["integer", "null"]}},
                ["title", "ops"],
            )},
            "matrices": {"type": "array", "items": _object(
                {"title": {"type": "string"},
                 "rows": {"type": "array", "items": {"type": "string"}},
                 "columns": {"type": "array", "items": {"type": "string"}},
                 "cells": {"type": "array", "items": _object(
                     {"row": {"type": "string"}, "column": {"type": "string"},
                      "status": _STATUS, "text": {"type": "string"},
                      "detail": {"type": "string"}},
                     ["row", "column", "status"],
                 )},
                 "row_label": {"type": "string"}, "column_label": {"type": "string"}},
                ["title", "rows", "columns", "cells"],
            )},
            "notes": {"type": "array", "items": {"type": "string"}},
            "environment": {"type": "object", "additionalProperties": {"type": "string"}},
            "target_words": {"type": "object", "additionalProperties": {"type": "string"}},
        },
        ["schema", "schema_version", "kind", "created", "nebisect_version", "title",
         "summary", "verdicts", "tables", "sweeps", "divergences", "matrices", "notes"],
    ),
}

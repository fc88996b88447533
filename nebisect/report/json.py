"""report.json: a :class:`ReportPayload` as a versioned, strict-JSON document.

The layout is documented in :mod:`nebisect.report.schema`; :func:`read_report` is
the inverse of :func:`report_document`, so tools (and tests) can load a report back
into the same records.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nebisect.errors import NebisectError
from nebisect.files import read_json
from nebisect.report.payload import REPORT_KINDS, ReportPayload
from nebisect.report.schema import REPORT_SCHEMA_VERSION, SCHEMA_NAME
from nebisect.version import __version__

#: The keys report.json holds around its payload (:func:`report_document`).
_ENVELOPE = ("schema", "schema_version", "kind", "created", "nebisect_version")


def check_kind(kind: str) -> None:
    if kind not in REPORT_KINDS:
        raise NebisectError(f"unknown report kind {kind!r}: one of {', '.join(REPORT_KINDS)}")


def report_document(kind: str, payload: ReportPayload, created: datetime | None = None) -> dict:
    """The report.json object for ``payload`` (see the schema module for the layout)."""
    check_kind(kind)
    stamp = (created or datetime.now(UTC)).astimezone(UTC).isoformat(timespec="seconds")
    return {
        "schema": SCHEMA_NAME,
        "schema_version": REPORT_SCHEMA_VERSION,
        "kind": kind,
        "created": stamp,
        "nebisect_version": __version__,
        **payload.to_dict(),
    }


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, allow_nan=False, ensure_ascii=False) + "\n"


def read_report(path: str | os.PathLike[str]) -> tuple[str, ReportPayload]:
    """(kind, payload) of a report.json written by this schema version (read by
    :func:`nebisect.files.read_json`: bounded, one-line errors)."""
    file = Path(path)
    document = read_json(file)
    if not isinstance(document, dict) or document.get("schema") != SCHEMA_NAME:
        raise NebisectError(f"{file}: not a nebisect report")
    if document.get("schema_version") != REPORT_SCHEMA_VERSION:
        raise NebisectError(
            f"{file}: report schema version {document.get('schema_version')} "
            f"(this nebisect reads {REPORT_SCHEMA_VERSION})"
        )
    body = {key: value for key, value in document.items() if key not in _ENVELOPE}
    return document["kind"], ReportPayload.from_dict(body)

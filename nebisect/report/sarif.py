"""SARIF 2.1.0 output of ``nebisect lint`` (GitHub code scanning and other viewers).

One run, tool driver ``nebisect`` with every registered rule as a
``reportingDescriptor``; one result per finding. Code scanning's conventions are
followed: each result has a ``ruleId`` and ``ruleIndex``, a ``level``, a message, one
location whose ``physicalLocation`` names the model package (relative URIs stay
relative, so alerts match across checkouts) with ``region.startLine`` 1 — a model has
no source lines; the op is named by the ``logicalLocations`` entry
(``function/op``) — and ``partialFingerprints`` from the rule, function and op name so
an alert survives re-conversion of an unchanged graph. Every object uses only
properties the SARIF 2.1.0 schema defines; nebisect's extras (fix name, op type,
numbers behind the message) go in ``properties`` bags, as the schema requires.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import quote

from nebisect.files import write_text
from nebisect.hazards import LintResult, Rule, registered_rules
from nebisect.report.payload import to_jsonable
from nebisect.version import __version__

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
FINGERPRINT_KEY = "nebisectFinding/v1"


def artifact_uri(source: str) -> str:
    """A URI reference for ``source``: relative paths stay relative (code scanning
    resolves them against the repository root), absolute ones become ``file://``."""
    path = PurePath(source)
    if path.is_absolute():
        return Path(source).as_uri()
    return quote(path.as_posix())


def _rule_name(rule_id: str) -> str:
    return "".join(part.capitalize() for part in rule_id.replace("_", "-").split("-"))


def _cure(rule: Rule) -> str:
    if rule.fix:
        return f"Fix: `nebisect fix apply {rule.fix} MODEL.mlpackage -o FIXED.mlpackage`."
    return f"Remedy: {rule.remedy}."


def _descriptor(rule: Rule) -> dict[str, Any]:
    help_text = f"{rule.rationale} Source: {rule.source}. {_cure(rule)}"
    return {
        "id": rule.id,
        "name": _rule_name(rule.id),
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": rule.rationale},
        "help": {"text": help_text, "markdown": help_text},
        "defaultConfiguration": {"level": rule.severity},
        "properties": {
            "tags": ["coreml", "fp16" if "fp16" in rule.id else "correctness"],
            "fix": rule.fix,
            "source": rule.source,
        },
    }


def sarif_log(result: LintResult) -> dict[str, Any]:
    """The SARIF 2.1.0 log (a JSON-ready dict) of one lint result."""
    rules = list(registered_rules().values())
    index = {rule.id: i for i, rule in enumerate(rules)}
    uri = artifact_uri(result.source or "model.mlpackage")
    results = []
    for finding in result.findings:
        qualified = f"{finding.function}/{finding.op_name}"
        digest = hashlib.sha256(f"{finding.rule_id}|{qualified}".encode()).hexdigest()
        results.append({
            "ruleId": finding.rule_id,
            "ruleIndex": index[finding.rule_id],
            "level": finding.severity,
            "message": {"text": finding.message},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": {"uri": uri},
                    "region": {"startLine": 1},
                },
                "logicalLocations": [{
                    "name": finding.op_name,
                    "fullyQualifiedName": qualified,
                    "kind": "function",
                    "properties": {"opType": finding.op_type},
                }],
            }],
            "partialFingerprints": {FINGERPRINT_KEY: digest[:32]},
            "properties": {
                "fix": finding.fix,
                "opType": finding.op_type,
                "details": to_jsonable(finding.details),
            },
        })
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [{
            "tool": {"driver": {
                "name": "nebisect",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [_descriptor(rule) for rule in rules],
            }},
            "artifacts": [{"location": {"uri": uri}, "roles": ["analysisTarget"]}],
            "invocations": [{
                "executionSuccessful": True,
                "properties": {
                    "fp16": result.assume_fp16,
                    "inputRanges": {
                        n: [r.lo, r.hi] for n, r in sorted(result.input_ranges.items())
                    },
                },
            }],
            "results": results,
        }],
    }


def sarif_text(result: LintResult) -> str:
    return json.dumps(sarif_log(result), indent=2, allow_nan=False) + "\n"


def write_sarif(path: str | os.PathLike[str], result: LintResult) -> Path:
    """Write the SARIF log of ``result`` to ``path`` atomically."""
    return write_text(path, sarif_text(result))

"""JUnit XML from verdicts, for CI systems that chart test results (run, replay, fuzz).

Mapping, chosen so that a CI dashboard separates "the model is wrong" from "the
model could not be evaluated": ``pass`` → a passing test case; ``mismatch`` and
``unrouted`` → ``<failure>`` (the check ran and found a wrong answer or a wrong
placement); ``crash``, ``error``, ``timeout`` and ``oom`` → ``<error>``; ``skipped``
→ ``<skipped>``. The verdict's signature is the failure ``type`` (stable across runs,
so dashboards group by bug), its message the ``message``, and its stderr tail goes
to ``<system-err>``. Test time is the verdict's total timing.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from nebisect.files import write_text
from nebisect.verdict import Verdict

FAILURE_STATUSES = frozenset({"mismatch", "unrouted"})
ERROR_STATUSES = frozenset({"crash", "error", "timeout", "oom"})

#: Characters XML 1.0 cannot carry (native stderr tails contain them).
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _clean(text: str) -> str:
    return _XML_INVALID.sub("\N{REPLACEMENT CHARACTER}", text)




def junit_xml(suite: str, results: Sequence[tuple[str, Verdict]]) -> str:
    """A ``<testsuites>`` document with one ``<testsuite>`` named ``suite``."""
    counts = {"failures": 0, "errors": 0, "skipped": 0}
    cases = []
    for name, verdict in results:
        case = ET.Element("testcase", {
            "classname": _clean(f"{suite}.{verdict.target}" if verdict.target else suite),
            "name": _clean(name),
            "time": f"{verdict.timings.seconds:.3f}",
        })
        message = _clean(verdict.message or verdict.signature)
        if verdict.status in FAILURE_STATUSES or verdict.status in ERROR_STATUSES:
            tag = "failure" if verdict.status in FAILURE_STATUSES else "error"
            counts["failures" if tag == "failure" else "errors"] += 1
            detail = ET.SubElement(
                case, tag, {"message": message, "type": _clean(verdict.signature)}
            )
            detail.text = _clean(
                f"status: {verdict.status}\nstage: {verdict.stage}\n"
                f"signature: {verdict.signature}\n{verdict.message}"
            )
        elif verdict.status == "skipped":
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", {"message": message})
        if verdict.stderr_tail:
            ET.SubElement(case, "system-err").text = _clean(verdict.stderr_tail)
        cases.append(case)
    total = sum(v.timings.seconds for _, v in results)
    attributes = {
        "name": _clean(suite), "tests": str(len(results)),
        **{k: str(v) for k, v in counts.items()}, "time": f"{total:.3f}",
    }
    root = ET.Element("testsuites", attributes)
    testsuite = ET.SubElement(root, "testsuite", attributes)
    testsuite.extend(cases)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(
    path: str | os.PathLike[str], suite: str, results: Sequence[tuple[str, Verdict]]
) -> Path:
    """Write the JUnit XML of ``results`` to ``path`` atomically (``--junit FILE``)."""
    return write_text(path, junit_xml(suite, results))

"""``run --markdown FILE``: a run's findings as upstream issue texts, one section each.

Each section is what a coremltools maintainer needs to act without asking back: a title
without nebisect's vocabulary, the versions, what happens (where the divergence enters,
the culprit op and how it was found, the conversion paths, the targets in words), the
numbers (torch against the converted program at the element the comparison reports,
the error in absolute terms and in ULPs, the tolerance that would pass) and a
standalone repro script. A run without findings says so in a short text (with the
versions, so the file still records what was checked). Margins — findings only at
inputs far beyond the model's — are not issues: a closing line counts them.

:func:`issue_markdown` is a pure function of the run's :class:`ReportPayload`
(:func:`nebisect.detect.report.run_payload` fills what issues need): no I/O, nothing
imported but records. Temporary paths (``/tmp/…``) are cut to their last component:
they would be noise in an issue.
"""

from __future__ import annotations

import math
import re
from pathlib import PurePosixPath

from nebisect.report.payload import ReportFinding, ReportPayload, WorstElement

#: where a divergence enters, in a maintainer's words (``run``'s attributions)
ATTRIBUTION_WORDS = {
    "conversion": "the converted MIL program, evaluated exactly (float64), already "
                  "disagrees with torch: the converter emitted different math, before "
                  "any precision or device effect",
    "precision": "the program agrees with the reference when evaluated exactly "
                 "(float64) but not in fp16: a range or precision hazard of the graph "
                 "that any fp16 device hits",
    "device": "the program agrees with the reference both exactly (float64) and in a "
              "careful fp16 evaluation; only the device, its lowering or its runtime, "
              "disagrees",
    "compression": "the compressed weights move the outputs past tolerance, against the "
                   "same program with uncompressed weights",
}
NUMBER_COLUMNS = ("target", "path", "inputs", "element", "reference", "converted",
                  "max abs error", "max error", "passes from", "tolerance")
#: a temporary path: a run's working directories are nobody else's business
_TEMPORARY = re.compile(r"(?:/private)?/(?:tmp|var/folders/[^\s/]+/[^\s/]+/T)(?:/[^\s/'\"]+)+")


def issue_markdown(payload: ReportPayload) -> str:
    """The Markdown of a run's findings (see the module docstring)."""
    source = _scrub(PurePosixPath(str(payload.summary.get("source", ""))).name)
    if not payload.findings:
        return "\n".join([
            f"# nebisect run {source}: no finding", "",
            _versions(payload.environment), "",
            "Every target agreed with the reference on every input set the run "
            "evaluated: there is no issue to report.", *_margins(payload), ""])
    lines = [f"# nebisect run {source}: {_count(len(payload.findings), 'finding')}", "",
             "One section per finding, most severe first: each is a ready issue text "
             "for apple/coremltools.", ""]
    for finding in payload.findings:
        lines += _section(finding, payload)
    lines += _margins(payload)
    return "\n".join(lines).rstrip("\n") + "\n"


def _section(finding: ReportFinding, payload: ReportPayload) -> list[str]:
    """One finding as one issue: title, versions, what happens, numbers, repro."""
    return ["---", "", f"## {finding.number}. {_scrub(finding.issue_title or finding.title)}",
            "", _versions(payload.environment), "", "### What happens", "",
            *_happens(finding, payload.target_words),
            *_numbers(finding.worst, _reference(payload)), *_repro(finding)]


def _versions(environment: dict[str, str]) -> str:
    """``**Versions:** coremltools 9.0 · torch 2.13.0 · … · Linux 6.8 (x86_64)``."""
    shown = dict(environment)
    found_with = shown.pop("nebisect", "")
    platform = [shown.pop(key) for key in ("machine", "chip") if key in shown]
    system = shown.pop("os", "")
    parts = [f"{name} {version}" for name, version in shown.items()]
    if system:
        parts.append(system + (f" ({', '.join(platform)})" if platform else ""))
    if found_with:
        parts.append(f"found with nebisect {found_with}")
    return f"**Versions:** {' · '.join(parts) or 'not recorded'}"


def _happens(finding: ReportFinding, target_words: dict[str, str]) -> list[str]:
    """Where it enters, the culprit and how it was found, the paths, the targets, the
    error text."""
    lines = []
    if finding.attribution:
        words = ATTRIBUTION_WORDS.get(finding.attribution, "")
        lines.append(f"- **Where it enters: {finding.attribution}**" + (f" — {words}." if words
                                                                         else ""))
    if finding.op_type:
        name = f" (`{finding.culprit}`)" if finding.culprit else ""
        how = f", found as {finding.located}" if finding.located else ""
        lines.append(f"- **Culprit op:** `{finding.op_type}`{name}{how}.")
    if finding.paths:
        lines.append(f"- **Conversion paths:** {', '.join(finding.paths)} (torch.export: "
                     "`torch.export.export(...).run_decompositions({})`; jit.trace: "
                     "`torch.jit.trace`), each converted with `coremltools.convert`.")
    if finding.targets:
        order = list(target_words)
        lines.append("- **Shows on:**")
        lines += [f"  - `{target}`: {target_words.get(target, target)}" for target in
                  sorted(finding.targets, key=lambda t: order.index(t) if t in order else
                         len(order))]
    if finding.message:
        stage = f" at {finding.stage}" if finding.stage else ""
        lines += ["", f"It fails{stage} with:", "", "```text", _scrub(finding.message), "```"]
    return [*lines, ""]


def _reference(payload: ReportPayload) -> str:
    """The reference the numbers compare with, in words."""
    reference = str(payload.summary.get("reference", ""))
    return f"`{reference}`, " + payload.target_words[reference] \
        if reference in payload.target_words else f"`{reference or 'the reference'}`"


def _numbers(worst: list[WorstElement], reference: str) -> list[str]:
    """The side-by-side table of :class:`WorstElement`s ('' without numbers)."""
    if not worst:
        return []
    lines = ["### Numbers", "",
             f"The reference ({reference}) against the converted program on each target, "
             "at the element its comparison reports and the smallest inputs failing there; "
             "errors in ULPs of the precision judged:", "",
             f"| {' | '.join(NUMBER_COLUMNS)} |", f"|{'---|' * len(NUMBER_COLUMNS)}"]
    for element in worst:
        unit = f"ULP ({element.precision})"
        cells = [f"`{element.target}`", element.path or "-", element.inputs,
                 f"`{element.output}`", _value(element.reference), _value(element.converted),
                 _error(element.abs_error), f"{_error(element.ulps)} {unit}",
                 "none" if math.isinf(element.needed) else f"{element.needed:.3g} ULP",
                 f"{element.allowed:g} ULP"]
        lines.append(f"| {' | '.join(map(_cell, cells))} |")
    return [*lines, ""]


def _repro(finding: ReportFinding) -> list[str]:
    """The repro script in a fence, with what it runs on; or why there is none. The
    script is folded (GitHub's ``<details>``): its model is on top, the few hundred
    lines that convert, predict and compare on any machine are below it, and an issue
    reads as its text, not as the script."""
    lines = ["### Repro", ""]
    if finding.repro_note:
        lines += [_scrub(finding.repro_note), ""]
    if finding.repro:
        lines += ["<details><summary>repro.py — self-contained, run with python</summary>",
                  "", "```python", finding.repro.rstrip("\n"), "```", "", "</details>", ""]
    return lines if len(lines) > 2 else []


def _margins(payload: ReportPayload) -> list[str]:
    """The closing line counting the margins left out."""
    count = int(payload.summary.get("margins", 0) or 0)
    if not count:
        return []
    return ["", f"_{_count(count, 'margin')} left out: a finding only at inputs far beyond "
            "the values the model starts from is a fact of fp16's range, not an issue "
            "(the run's output lists them)._"]


def _cell(text: str) -> str:
    """``text`` as a table cell: its pipes escaped (``|x|`` is not three columns)."""
    return text.replace("|", "\\|")


def _value(value: float) -> str:
    """A value in enough digits to tell torch's from the converted one."""
    return format(value, ".9g")


def _error(value: float) -> str:
    return "inf" if math.isinf(value) else format(value, ".3g")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _scrub(text: str) -> str:
    """``text`` with every temporary path cut to ``…/`` and its last component."""
    return _TEMPORARY.sub(lambda match: "…/" + match.group(0).rsplit("/", 1)[-1], text)

"""A finding's first line, worded like the title of a bug report.

``precision: reduce_log_sum_exp returns inf/NaN in fp16 from |input| ≈ 7.63 (sim:fp16,
sim:ane; both paths); in fp32 from |input| ≈ 88.7 (sim:fp32)`` — where the failure
enters, at which op, what it does, from which input on at each precision, on which
targets and conversion paths. An error finding names its stage and its message instead;
a compression finding its message (:func:`nebisect.detect.compression.failure_words`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from nebisect.detect.causes import COMPRESSION, RunFinding, symptom_of
from nebisect.search.records import FailureGroup
from nebisect.search.space import Member
from nebisect.sources.convert import CURED_PREFIX, CURED_SUFFIX, OVERRIDES_NOTE, PATH_LABELS
from nebisect.targets import spec_of

#: what each symptom class does, as a verb phrase after the op
PHRASES = {
    "crash": "crashes the process",
    "timeout": "hangs past the timeout",
    "oom": "runs out of memory",
    "nonfinite": "returns inf/NaN",
    "collapse": "collapses its output (variation lost)",
    "shape": "returns the wrong shape",
    "integer": "returns wrong integers",
    "tolerance": "is off beyond tolerance",
    "unrouted": "runs off the Neural Engine",
}
#: an error message is cut here in a title (report.json keeps it whole)
MESSAGE_CHARS = 160


def trigger_words(member: Member) -> str:
    """Where a failure starts, in a user's words."""
    if member.family == "example":
        return "at the example inputs"
    if member.family == "length":
        return f"at length {member.magnitude:g}" if member.magnitude else (
            "at the generated inputs")
    if member.x is not None:
        extent = "" if math.isclose(abs(member.x), member.magnitude, rel_tol=1e-3) else (
            f" (|input| ≤ {member.magnitude:.3g})")
        return f"from {member.family} x ≈ {member.x:.3g}{extent}"
    if member.magnitude == 0:
        return f"at {member.label}"
    return f"from |input| ≈ {member.magnitude:.3g}"


def path_words(paths: Sequence[str], run_paths: Sequence[str]) -> str:
    """``both paths``, ``jit.trace only``, or '' for a source with no conversion."""
    real = list(dict.fromkeys(p for p in paths if p))
    if not real:
        return ""
    if len(run_paths) > 1 and set(real) >= set(run_paths):
        return "both paths"
    only = ", ".join(PATH_LABELS.get(p, p) for p in real)
    return f"{only} only" if len(run_paths) > 1 else only


def title(finding: RunFinding, run_paths: Sequence[str], cured: Sequence[str] = ()) -> str:
    """The finding's first line (see the module docstring); ``run_paths`` are the
    conversion paths the run evaluated (one, two, or none for a package), ``cured``
    those of them converted with nebisect's converter overrides: a finding on one says
    so, as nobody may take it for the program coremltools makes at its defaults."""
    said = _title(finding, run_paths)
    overridden = [PATH_LABELS.get(p, p) for p in finding.paths if p and p in cured]
    if not overridden or finding.attribution == COMPRESSION or (
            finding.stage == "convert" and finding.message.startswith(CURED_PREFIX)):
        return said
    return f"{said}; {', '.join(overridden)} {OVERRIDES_NOTE}"


def _title(finding: RunFinding, run_paths: Sequence[str]) -> str:
    head = f"{finding.attribution or 'unattributed'}: "
    if finding.attribution == COMPRESSION:
        return f"{head}{finding.message}"
    what = finding.op_type or "the model"
    if finding.symptom == "error":
        message = _cut(" ".join(finding.message.split()))
        on = path_words(finding.paths, run_paths)
        if finding.stage == "convert":
            only = f" on {on}" if on and on != "both paths" else ""
            said = message if message.startswith("conversion fails") else (
                f"conversion fails{only}: {message}")
            return f"{head}{said} ({_targets(finding.targets)})"
        return (f"{head}{what} fails at {finding.stage}: {message} "
                f"({_where(finding.targets, finding.paths, run_paths)})")
    phrase = PHRASES.get(finding.symptom, finding.symptom)
    clauses = []
    # A cliff's tolerance misses on the way to it are not where it returns inf/NaN.
    showing = [g for g in finding.groups if symptom_of(g.signature) == finding.symptom]
    for precision, targets, member, step in _by_precision(showing or finding.groups):
        seen_on = [g.path for g in finding.groups if g.target in targets]
        at_step = f" at step {step}" if step else ""
        clauses.append(f"in {precision} {trigger_words(member)}{at_step} "
                       f"({_where(targets, seen_on, run_paths)})")
    nearer = finding.smallest
    if showing and nearer.magnitude < min(g.smallest.magnitude for g in showing):
        clauses.append(f"off beyond tolerance {trigger_words(nearer)}")
    also = [a for a in finding.attributions[1:] if a]
    seen = f"; also attributed {', '.join(also)} at larger inputs" if also else ""
    return f"{head}{what} {phrase} " + "; ".join(clauses) + seen


def _cut(message: str) -> str:
    """``message`` within :data:`MESSAGE_CHARS`; a conversion failure cured by the
    overrides keeps its last clause besides (that the path was judged as so converted)."""
    if message.startswith(CURED_PREFIX) and message.endswith(CURED_SUFFIX):
        body, _, judged = message.rpartition("; ")
        return f"{_cut(body)}; {judged}"
    if len(message) <= MESSAGE_CHARS:
        return message
    return message[:MESSAGE_CHARS - 1] + "…"


def _by_precision(groups: Sequence[FailureGroup]) -> list[tuple[str, list[str], Member, int]]:
    """(precisions, their targets, their smallest trigger among ``groups``, the decode
    step it fails at: 0 for a model without state), lowest trigger first; the precisions
    that share a trigger share a clause."""
    found: dict[str, tuple[list[str], FailureGroup]] = {}
    for group in groups:
        precision = spec_of(group.target).precision
        targets, smallest = found.get(precision, ([], group))
        if group.target not in targets:
            targets.append(group.target)
        if (group.smallest.magnitude, group.smallest.label) < (smallest.smallest.magnitude,
                                                               smallest.smallest.label):
            smallest = group
        found[precision] = (targets, smallest)
    ordered = sorted(found.items(), key=lambda item: (item[1][1].smallest.magnitude, item[0]))
    merged: dict[str, tuple[list[str], list[str], FailureGroup]] = {}
    for precision, (targets, smallest) in ordered:  # one clause per distinct trigger
        precisions, together, _ = merged.setdefault(smallest.smallest.label,
                                                    ([], [], smallest))
        precisions.append(precision)
        together += targets
    return [(", ".join(precisions), targets, group.smallest, group.step)
            for precisions, targets, group in merged.values()]


def _targets(targets: Sequence[str]) -> str:
    return ", ".join(targets)


def _where(targets: Sequence[str], paths: Sequence[str], run_paths: Sequence[str]) -> str:
    words = path_words(paths, run_paths)
    return f"{_targets(targets)}; {words}" if words else _targets(targets)

"""A finding's first line, worded like the title of a bug report.

``precision: reduce_log_sum_exp returns inf/NaN in fp16 from |input| ≈ 7.63 (sim:fp16,
sim:ane; both paths); in fp32 from |input| ≈ 88.7 (sim:fp32)`` — where the failure
enters, at which op, what it does, from which input on at each precision, on which
targets and conversion paths. Where the factory's example inputs fail with another
symptom than the finding's worst, the title says first what the example shows
(``conversion: select is off beyond tolerance at the example inputs (…); returns inf/NaN
in fp32 at mask(ones) (…)``): the example is the input a user knows. An error finding
names its stage and its message instead; a compression finding its message
(:func:`nebisect.detect.compression.failure_words`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from nebisect.detect.causes import COMPRESSION, SEVERITY, RunFinding, symptom_of
from nebisect.search.records import FailureGroup
from nebisect.search.space import Member
from nebisect.sources.convert import CURED_PREFIX, CURED_SUFFIX, OVERRIDES_NOTE, PATH_LABELS
from nebisect.targets.registry import spec_of

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
#: the members that stand for an input set of their own rather than for a value scale:
#: the example, generated inputs, ``--inputs``
OWN_INPUTS = ("example", "length", "inputs")


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
    if member.magnitude == 0 or member.family not in OWN_INPUTS:
        # a variant (mask(ones), tokens(last)) is what fails, not its values' scale
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


def input_words(member: Member) -> str:
    """Where a failure starts, in words a converter maintainer knows: how large the
    inputs are, not which of nebisect's value families drew them."""
    if member.family == "length" and not member.magnitude:
        return "at seeded random inputs"
    if member.family in ("example", "length"):
        return trigger_words(member)
    if member.magnitude == 0:
        return "at all-zero inputs"
    if member.family == "const" and member.x is not None:
        return f"at constant inputs x = {member.x:.6g}"
    return f"at inputs up to |x| ≈ {member.magnitude:.3g}"


#: the targets an issue names as devices (a precision alone is said by its clause)
DEVICE_WORDS = {"cpu": "Core ML CPU", "gpu": "Core ML GPU", "ne": "Neural Engine",
                "all": "Core ML, all compute units", "ane": "Neural Engine"}


def device_words(target: str) -> str:
    """The device a target stands for (``Neural Engine`` for ``coreml:ne`` and the
    simulator's model of it), '' for a precision alone (``sim:fp16``)."""
    spec = spec_of(target)
    runs_on_device = spec.backend.startswith("coreml") or spec.variant == "ane"
    return DEVICE_WORDS.get(spec.variant, "") if runs_on_device else ""


def _issue_where(targets: Sequence[str], paths: Sequence[str], run_paths: Sequence[str]) -> str:
    """The devices among ``targets`` and the conversion paths, as torch names them."""
    devices = ", ".join(dict.fromkeys(w for w in map(device_words, targets) if w))
    words = path_words(paths, run_paths).replace(
        "both paths", " and ".join(PATH_LABELS[p] for p in run_paths if p in PATH_LABELS))
    return "; ".join(part for part in (devices, words) if part)


@dataclass(frozen=True)
class Wording:
    """How a title says where a failure starts (``trigger``) and where it shows
    (``where``: targets, their paths, the run's paths): in nebisect's words for the
    terminal, in a converter maintainer's for an upstream issue. ``converting_targets``:
    a conversion failure names the targets whose conversion showed it (nebisect
    converts per target precision; a maintainer reads the path alone)."""

    trigger: Callable[[Member], str]
    where: Callable[[Sequence[str], Sequence[str], Sequence[str]], str]
    converting_targets: bool = True


def _where(targets: Sequence[str], paths: Sequence[str], run_paths: Sequence[str]) -> str:
    """The targets, and the conversion paths as :func:`path_words` says them."""
    words = path_words(paths, run_paths)
    shown = ", ".join(targets)
    return f"{shown}; {words}" if words else shown


RUN_WORDS = Wording(trigger_words, _where)
ISSUE_WORDS = Wording(input_words, _issue_where, converting_targets=False)


def issue_title(finding: RunFinding, run_paths: Sequence[str]) -> str:
    """The finding's title for an upstream issue: the clauses of :func:`title` without
    nebisect's vocabulary (no simulator targets, no value families)."""
    return _title(finding, run_paths, ISSUE_WORDS)


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


def _title(finding: RunFinding, run_paths: Sequence[str], words: Wording = RUN_WORDS) -> str:
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
            shown = f" ({', '.join(finding.targets)})" if words.converting_targets else ""
            return f"{head}{said}{shown}"
        return (f"{head}{what} fails at {finding.stage}: {message} "
                f"({words.where(finding.targets, finding.paths, run_paths)})")
    phrase = PHRASES.get(finding.symptom, finding.symptom)
    at_example = _example_clause(finding, run_paths, words)
    if at_example:
        head = f"{head}{what} {at_example}; "
        what = ""
    clauses = []
    # A cliff's tolerance misses on the way to it are not where it returns inf/NaN.
    showing = [g for g in finding.groups if symptom_of(g.signature) == finding.symptom]
    for precision, targets, member, step in _by_precision(showing or finding.groups):
        seen_on = [g.path for g in finding.groups if g.target in targets]
        at_step = f" at step {step}" if step else ""
        shown = words.where(targets, seen_on, run_paths)
        clauses.append(f"in {precision} {words.trigger(member)}{at_step}"
                       + (f" ({shown})" if shown else ""))
    nearer = finding.smallest
    if showing and nearer.magnitude < min(g.smallest.magnitude for g in showing) and (
            not at_example.startswith(PHRASES["tolerance"])):
        clauses.append(f"off beyond tolerance {words.trigger(nearer)}")
    also = [a for a in finding.attributions[1:] if a]
    seen = f"; also attributed {', '.join(also)} at larger inputs" if also else ""
    return f"{head}{f'{what} ' if what else ''}{phrase} " + "; ".join(clauses) + seen


def _example_clause(finding: RunFinding, run_paths: Sequence[str], words: Wording) -> str:
    """``is off beyond tolerance at the example inputs (targets; paths)`` when the
    example fails with another symptom than the finding's (the worst of them when
    several); '' when it shows the finding's, or does not fail."""
    failing = [g for g in finding.groups if any(m.family == "example" for m in g.members)]
    shown = {symptom_of(g.signature) for g in failing}
    if not shown or finding.symptom in shown:
        return ""
    worst = min(shown, key=lambda s: SEVERITY.index(s) if s in SEVERITY else len(SEVERITY))
    groups = [g for g in failing if symptom_of(g.signature) == worst]
    example = next(m for g in groups for m in g.members if m.family == "example")
    where = words.where(list(dict.fromkeys(g.target for g in groups)),
                        [g.path for g in groups], run_paths)
    return (f"{PHRASES.get(worst, worst)} {words.trigger(example)}"
            + (f" ({where})" if where else ""))


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

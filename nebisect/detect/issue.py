"""What an upstream issue needs from a run, beside what its report already says.

A coremltools maintainer reads a finding without nebisect: the versions it was seen
with (:func:`environment`), each target in words they know (:func:`target_words`), the
title without nebisect's vocabulary (:func:`~nebisect.detect.titles.issue_title`), how
the culprit op was found (:func:`located`) and the numbers: torch against the
converted program at the element each failing comparison reports
(:func:`worst_elements`). :func:`issue_finding` adds them to a finding's report entry;
:mod:`nebisect.report.issue` renders them. Nothing here runs anything.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from nebisect.detect.causes import RunFinding
from nebisect.detect.culprit import BY_INTERMEDIATES, BY_TORCH, OUTPUTS_ONLY, OWN_NONFINITE
from nebisect.detect.findings import Row
from nebisect.detect.titles import input_words, issue_title
from nebisect.isolation.provenance import package_version, provenance
from nebisect.report.payload import ReportFinding, WorstElement
from nebisect.search.records import Culprit, FailureGroup
from nebisect.sources.convert import PATH_LABELS
from nebisect.targets.registry import spec_of
from nebisect.verdict import Comparison

#: the versions an issue states, in this order (``transformers`` only when installed:
#: coremltools imports it whenever it is, so it takes part in every conversion)
VERSIONS = ("coremltools", "torch", "numpy", "transformers", "python", "os", "machine",
            "chip", "nebisect")
#: each target, in a converter maintainer's words, by (backend, variant)
TARGET_WORDS = {
    ("sim", "fp64"): "the converted MIL program evaluated exactly, in float64 (nebisect's "
                     "MIL simulator): what the converter's math computes",
    ("sim", "fp32"): "the program at fp32 (nebisect's MIL simulator; Core ML CPU_ONLY on "
                     "a Mac)",
    ("sim", "fp16"): "the program at fp16, each op computed in fp32 and stored in fp16, as "
                     "a careful fp16 device does (nebisect's MIL simulator; Core ML "
                     "CPU_AND_GPU on a Mac)",
    ("sim", "fp16-naive"): "the program in fp16 arithmetic by textbook formulas, sums in fp16 "
                           "(nebisect's MIL simulator)",
    ("sim", "ane"): "a model of the Neural Engine's published fp16 behaviour (nebisect's "
                    "MIL simulator; Core ML CPU_AND_NE on a Mac)",
    ("coreml", "cpu"): "Core ML, compute units CPU_ONLY",
    ("coreml", "gpu"): "Core ML, compute units CPU_AND_GPU",
    ("coreml", "ne"): "Core ML, compute units CPU_AND_NE (the Neural Engine)",
    ("coreml", "all"): "Core ML, compute units ALL",
}
_DTYPE_WORDS = {"fp64": "float64", "fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
#: how the culprit was found, by what was compared (:mod:`nebisect.detect.culprit`)
LOCATED = {
    BY_INTERMEDIATES: "the first op whose own output breaks tolerance, every intermediate "
                      "value of the program compared with the same program evaluated "
                      "exactly (float64)",
    OWN_NONFINITE: "the first op that computes inf/NaN from finite values, in the program "
                   "evaluated exactly (float64)",
    OUTPUTS_ONLY: "the op producing the first model output that disagrees with torch: "
                  "no MIL value matched to torch's own intermediate values (by name, op, "
                  "shape and place) carries the divergence there, so the cause may lie "
                  "upstream of it",
}


def environment(rows: Sequence[Row]) -> dict[str, str]:
    """The versions and platform the run's verdicts were recorded with (the first
    stamped verdict's provenance, else this process's), in :data:`VERSIONS` order."""
    stamped = next((r.verdict.provenance for r in rows if r.verdict.provenance),
                   provenance(""))
    found = {**stamped, "transformers": package_version("transformers")}
    return {name: found[name] for name in VERSIONS
            if found.get(name) and found[name] != "not installed"}


def target_words(targets: Sequence[str]) -> dict[str, str]:
    """Each of ``targets`` in words (:data:`TARGET_WORDS`; the op definitions' semantics
    said so; a plugin's target as its name)."""
    words = {}
    for target in dict.fromkeys(targets):
        spec = spec_of(target)
        said = TARGET_WORDS.get((spec.backend, spec.variant), target)
        if spec.backend == "torch":
            dtype = _DTYPE_WORDS.get(spec.precision, spec.precision)
            said = f"the torch module itself, eager, in {dtype}"
        if spec.semantics:
            said += ", each op as coremltools defines it (not as the runtime computes it)"
        words[target] = said
    return words


def located(culprit: Culprit | None) -> str:
    """How the culprit op was found, and the inf/NaN constants it reads ('' without
    a culprit)."""
    if culprit is None:
        return ""
    # found by torch's intermediates, its words say which node and what differs
    said = LOCATED.get(culprit.compared) or culprit.compared.removeprefix(f"{BY_TORCH}: ")
    if culprit.constants:
        said += f"; it reads the constant(s) {', '.join(culprit.constants)}"
    return said


def issue_finding(entry: ReportFinding, finding: RunFinding, rows: Sequence[Row],
                  run_paths: Sequence[str]) -> ReportFinding:
    """``entry`` (the finding's report entry) with what an issue adds: its title in a
    maintainer's words, culprit, paths, targets, error text and numbers."""
    culprit = finding.representative.culprit
    return replace(
        entry, issue_title=issue_title(finding, run_paths), op_type=finding.op_type,
        culprit=culprit.op if culprit else "", located=located(culprit),
        paths=[PATH_LABELS.get(p, p) for p in finding.paths if p], targets=finding.targets,
        stage=finding.stage, message=finding.message if finding.symptom == "error" else "",
        worst=worst_elements(finding, rows))


def worst_elements(finding: RunFinding, rows: Sequence[Row]) -> list[WorstElement]:
    """One :class:`WorstElement` per group of ``finding`` whose smallest failing row was
    measured (an error or a crash has no numbers), the smallest trigger first; groups
    that differ only by their conversion path and measured the same values are one,
    naming both paths."""
    found: dict[tuple[object, ...], WorstElement] = {}
    for group in sorted(finding.groups, key=lambda g: (g.smallest.magnitude, g.smallest.label)):
        comparison = _failing_comparison(group, rows)
        if comparison is None:
            continue
        element = _element(group, comparison)
        key = (element.target, element.kind, element.inputs, element.output,
               element.reference, element.converted)
        if key in found:
            found[key].path = f"{found[key].path}, {element.path}"
        else:
            found[key] = element
    return list(found.values())


def _failing_comparison(group: FailureGroup, rows: Sequence[Row]) -> Comparison | None:
    """The first failing output comparison of ``group``'s smallest failing row."""
    row = next((r for r in rows if r.key == group.key and r.input_set == group.smallest),
               None)
    measured = row.verdict.error_metrics if row is not None else None
    if measured is None:
        return None
    return next((c for c in measured.comparisons if not c.passed and c.kind != "shape"), None)


def _element(group: FailureGroup, comparison: Comparison) -> WorstElement:
    """The numbers of one failing comparison; an inf/NaN output has no finite error, so
    no tolerance passes it."""
    index = ", ".join(map(str, comparison.worst_index))
    reference, converted = comparison.worst_reference, comparison.worst_output
    at_element = abs(converted - reference)
    if not math.isfinite(at_element):
        abs_error = ulps = needed = math.inf
    else:
        abs_error = max(comparison.max_abs_error, at_element)
        ulps, needed = comparison.max_ulp_error, comparison.required_ulps
    return WorstElement(
        group.target, PATH_LABELS.get(group.path, group.path),
        input_words(group.smallest).removeprefix("at "),
        f"{comparison.name}[{index}]" if index else comparison.name, comparison.kind,
        reference, converted, abs_error, ulps,
        comparison.precision or spec_of(group.target).precision, needed,
        comparison.tolerance.ulps)

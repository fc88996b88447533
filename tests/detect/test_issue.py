"""What an upstream issue adds to a finding: its numbers, its title in a maintainer's
words, how the culprit was found, the versions and the targets in words."""

from __future__ import annotations

import math

import numpy as np

from nebisect.detect.causes import root_causes
from nebisect.detect.culprit import BY_TORCH, OUTPUTS_ONLY
from nebisect.detect.findings import Row
from nebisect.detect.issue import environment, issue_finding, located, target_words
from nebisect.detect.report import report_findings
from nebisect.detect.titles import issue_title, title
from nebisect.oracle import judge
from nebisect.search.records import Culprit, FailureGroup
from nebisect.search.space import Member
from nebisect.verdict import Verdict

PATHS = ["export", "trace"]
#: torch's std of a seeded 5×5×5 draw, and what the program computes dividing by N
REFERENCE, DIVIDED_BY_N = 0.9538865190, 0.9500633478


def _row(target: str, path: str, member: Member, output: float, precision: str) -> Row:
    verdict = judge({"out": np.array([REFERENCE])}, {"out": np.array([output])}, precision)
    culprit = Culprit("sqrt_0", "sqrt", verdict.signature, OUTPUTS_ONLY, matched=False)
    return Row(target, 0, verdict, attribution="conversion" if target != "sim:fp16" else
               "precision", path=path, input_set=member, culprit=culprit)


def _finding_and_rows() -> tuple[object, list[Row]]:
    """std's conversion bug on sim:fp32 (both paths: the same numbers) at seeded random
    inputs, and fp16's overflow of its square at inputs up to 278 (export only)."""
    static = Member("length", "static")
    large = Member("normal", "normal(x=129)", 129.0, 278.0)
    rows = [_row("sim:fp32", path, static, DIVIDED_BY_N, "fp32") for path in PATHS]
    rows.append(_row("sim:fp16", "export", large, math.inf, "fp16"))
    groups = [FailureGroup.starting(r.key, r.attribution, r.culprit, r.input_set,
                                    r.verdict.message) for r in rows]
    (finding,) = root_causes(groups, rows, lambda magnitude: 0.0,
                             lambda found: title(found, PATHS))
    return finding, rows


def test_the_numbers_merge_paths_that_measured_the_same_values() -> None:
    finding, rows = _finding_and_rows()
    entry = issue_finding(report_findings([finding])[0], finding, rows, PATHS)
    fp32, fp16 = entry.worst
    assert (fp32.target, fp32.path, fp32.inputs, fp32.output, fp32.kind) == (
        "sim:fp32", "torch.export, jit.trace", "seeded random inputs", "out[0]", "tolerance")
    assert (fp32.reference, fp32.converted) == (REFERENCE, DIVIDED_BY_N)
    assert fp32.abs_error == abs(REFERENCE - DIVIDED_BY_N)
    assert fp32.precision == "fp32" and fp32.allowed == 256.0
    assert fp32.ulps == fp32.needed and 3.36e4 < fp32.ulps < 3.37e4
    assert (fp16.target, fp16.path, fp16.inputs, fp16.kind) == (
        "sim:fp16", "torch.export", "inputs up to |x| ≈ 278", "nonfinite")
    assert (fp16.converted, fp16.abs_error, fp16.ulps, fp16.needed) == (math.inf,) * 4
    assert (entry.op_type, entry.culprit, entry.paths) == (
        "sqrt", "sqrt_0", ["torch.export", "jit.trace"])
    assert entry.located.startswith("the op producing the first model output that disagrees "
                                    "with torch")


def test_the_issue_title_has_no_nebisect_vocabulary() -> None:
    finding, _ = _finding_and_rows()
    assert finding.title == (
        "conversion: sqrt returns inf/NaN in fp16 from normal x ≈ 129 (|input| ≤ 278) "
        "(sim:fp16; torch.export only); off beyond tolerance at the generated inputs; also "
        "attributed precision at larger inputs")
    assert issue_title(finding, PATHS) == (
        "conversion: sqrt returns inf/NaN in fp16 at inputs up to |x| ≈ 278 (torch.export "
        "only); off beyond tolerance at seeded random inputs; also attributed precision at "
        "larger inputs")


def test_targets_versions_and_culprits_in_words() -> None:
    words = target_words(["sim:fp64", "coreml:ne", "torch:cpu:fp64", "sim:fp16:spec"])
    assert words["coreml:ne"] == "Core ML, compute units CPU_AND_NE (the Neural Engine)"
    assert words["torch:cpu:fp64"] == "the torch module itself, eager, in float64"
    assert words["sim:fp16:spec"].endswith("each op as coremltools defines it (not as the "
                                           "runtime computes it)")
    stamped = Verdict("pass")
    stamped.provenance = {"nebisect": "0.1.0", "coremltools": "9.0", "torch": "2.13.0",
                          "numpy": "2.4.6", "python": "3.11.7", "os": "Linux 6.8",
                          "machine": "x86_64", "chip": "", "isolation": "fork"}
    found = environment([Row("sim:fp32", 0, stamped)])
    assert list(found)[:3] == ["coremltools", "torch", "numpy"]
    assert "isolation" not in found and "chip" not in found
    assert list(found)[-1] == "nebisect"
    assert located(None) == ""
    assert located(Culprit("mask", "select", "mismatch:nonfinite", "elsewhere",
                           constants=("'var_3' = -inf",))) == (
        "elsewhere; it reads the constant(s) 'var_3' = -inf")
    by_torch = Culprit("masked_fill", "select", "mismatch:shape",
                       f"{BY_TORCH}: the first value of the program whose disagreement with "
                       "the torch.export node it is named after reaches the outputs, "
                       "masked_fill: dtype bool where the reference is float64")
    assert located(by_torch) == (
        "the first value of the program whose disagreement with the torch.export node it is "
        "named after reaches the outputs, masked_fill: dtype bool where the reference is "
        "float64")

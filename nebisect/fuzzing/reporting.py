"""Findings as a newcomer reads them: in the terminal, by root cause; in a report
(``--report DIR``), as rows.

The terminal speaks as ``run`` does: one block per root cause
(:mod:`nebisect.fuzzing.causes`) — the signature and the law theory states for it once,
then each bracket, in ``run``'s words (a cliff: two adjacent values, the outputs on
both sides at the element that breaks, beside the boundary theory predicts), and
beneath it the cases that show it. The report keeps one row per case, and every cliff
also becomes a plot: the predictions the localization made, target against reference,
with the bracket and the predicted boundary marked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.markup import escape

from nebisect.detect.summary import bracket_text
from nebisect.fuzzing.campaign import CampaignResult, Finding
from nebisect.fuzzing.causes import RootCause, root_causes
from nebisect.fuzzing.model_subject import describe_case
from nebisect.opspecs.strategies import describe
from nebisect.verdict import Verdict

if TYPE_CHECKING:
    from nebisect.fuzzing.model_findings import ModelFindings

COLUMNS = ("op", "signature", "params", "minimal case", "cliff bracket", "predicted boundary",
           "predictions")

#: what each failure kind means, for the legend under the table
KIND_HELP = {
    "collapse": "output ≈ 0 where the float64 reference is large (an fp16 overflow swallowed)",
    "nonfinite": "inf/NaN where the float64 reference is finite",
    "nan-suppressed": "reference is NaN (a NaN input must propagate) but the output is finite",
    "tolerance": "finite but wrong beyond the fp16 error budget",
    "shape": "wrong output shape or dtype",
    "crash": "the process died (signal)",
    "error": "the target raised an error",
    "timeout": "the case did not finish in time",
    "oom": "the case ran out of memory",
}


def kind_of(finding: Finding) -> str:
    return finding.signature.split(":")[1] if finding.status == "mismatch" else finding.status


def minimal_case(finding: Finding) -> str:
    if "program" not in finding.case:
        return describe_case(finding.case)
    program = finding.case["program"]
    parts = [f"{name}{shape}: {describe(finding.case['values'][name])}"
             for name, shape in program["inputs"].items()]
    return "; ".join(parts)


def params_of(finding: Finding) -> str:
    """The parameter class without the subject's name (``axes=1/keep_dims``)."""
    return finding.param_class.removeprefix(finding.subject).strip("/") or "-"


def case_label(finding: Finding) -> str:
    """``axes=1/no_keep_dims: x[2, 3]: uniform[-15,15]`` for an op, ``const(x=7.625) on
    export, base inputs`` for a model."""
    if "program" not in finding.case:
        return minimal_case(finding)
    return f"{params_of(finding)}: {minimal_case(finding)}"


def cause_lines(cause: RootCause) -> list[str]:
    """One root cause as text lines (rich markup): the signature and its law, then each
    bracket with the cases that show it, then the cases without a cliff."""
    law = cause.law
    theory = "" if law is None else f" — theory {law.formula}" + (f": {law.why}" if law.why
                                                                   else "")
    count = len(cause.findings)
    lines = [f"[red]✗[/] {escape(cause.subject)}: {escape(cause.signature)} in {count} "
             f"failing case{'s' if count != 1 else ''}{escape(theory)}"]
    for bracket in cause.brackets():
        cliff = bracket.first.cliff
        assert cliff is not None
        where = f" in {bracket.family}" if bracket.family else ""
        text = f"{bracket_text(cliff, where)}, {cliff.predictions} predictions"
        if cliff.predicted is not None:
            text += f"; theory {cliff.predicted['label']} = {cliff.predicted['value']:.6g}"
        lines.append(escape(f"    {text}"))
        lines += [escape(f"        {case_label(f)}") for f in bracket.findings]
    lines += [escape(f"    {case_label(f)}") for f in cause.without_cliff()]
    return lines


def causes(results: list[CampaignResult]) -> list[RootCause]:
    """Every result's findings by root cause, ops in order."""
    return [cause for result in results for cause in root_causes(result.findings)]


def row(finding: Finding) -> list[Any]:
    """One finding as table cells (see :data:`COLUMNS`)."""
    cliff = finding.cliff
    bracket = predicted = predictions = ""
    if cliff is not None:
        bracket = f"{cliff.lo!r} | {cliff.hi!r}"  # shortest exact spelling of fp16 values
        predictions = str(cliff.predictions)
        if cliff.predicted:
            predicted = f"{cliff.predicted['label']} = {cliff.predicted['value']:.5g}"
    return [finding.subject, finding.signature, params_of(finding), minimal_case(finding),
            bracket, predicted, predictions]


def rows(results: list[CampaignResult]) -> list[list[Any]]:
    """Every finding, grouped by op and signature."""
    findings = [f for result in results for f in result.findings]
    return [row(f) for f in sorted(findings, key=lambda f: (f.subject, f.signature))]


def legend(results: list[CampaignResult]) -> list[str]:
    """What each failure kind in the table means."""
    kinds = dict.fromkeys(kind_of(f) for r in results for f in r.findings)
    return [f"{kind}: {KIND_HELP[kind]}" for kind in kinds if kind in KIND_HELP]


def payload(results: list[CampaignResult], target: str, seed: int, budget: int,
            model: ModelFindings | None = None) -> Any:
    """The :class:`nebisect.report.ReportPayload` of a fuzz session; a model's findings
    (``model``) are listed above the plots as ``run`` lists its own."""
    from nebisect.detect.report import report_findings
    from nebisect.report import NamedVerdict, ReportPayload, Table

    findings = [f for r in results for f in r.findings]
    return ReportPayload(
        title=f"nebisect fuzz on {target}",
        summary={
            "target": target, "seed": seed, "budget per op": budget,
            "ops": [r.subject for r in results],
            "cases generated": sum(r.generated for r in results),
            "cases evaluated": sum(r.evaluations for r in results),
            "findings": len(model.findings) if model is not None else len(causes(results)),
            "failing cases": len(findings),
            "skipped": {r.subject: r.skipped for r in results if r.skipped},
        },
        findings=report_findings(model.findings) if model is not None else [],
        verdicts=[NamedVerdict(f"{f.param_class} {f.signature}", Verdict.from_dict(f.verdict),
                               group=f.subject) for f in findings],
        tables=[Table("findings", list(COLUMNS), rows(results))],
        sweeps=[_sweep(f, target) for f in findings if f.cliff is not None],
        notes=legend(results),
    )


def _sweep(finding: Finding, target: str) -> Any:
    from nebisect.report import CliffSweep

    cliff = finding.cliff
    assert cliff is not None
    probes = cliff.probes
    predicted = cliff.predicted or {}
    return CliffSweep(
        title=f"{finding.param_class}: {finding.signature}",
        x=[p["x"] for p in probes],
        output=[_number(p["output"].get("output")) for p in probes],
        reference=[_number(p["output"].get("reference")) for p in probes],
        target=target,
        bracket=[cliff.lo, cliff.hi],
        bracket_outputs=[_number(cliff.lo_output.get("output")),
                         _number(cliff.hi_output.get("output"))],
        predicted_boundary=predicted.get("value"),
        predicted_label=predicted.get("label", ""),
        predictions=cliff.predictions,
        x_label="x (every element of the first input)",
    )


def _number(value: Any) -> float:
    return float("nan") if value is None else float(value)

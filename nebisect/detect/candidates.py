"""A package's lint errors as candidate causes beside what the run found.

``nebisect lint`` reads hazards off the program (an fp16 ``-inf`` mask constant, a
``square`` whose bound leaves fp16) without predicting anything; ``run`` predicts
without reading rules. Side by side, each says more: a finding whose culprit op lint
flags is explained by the rule (``fp16-inf-mask``), and an error-severity hazard no
finding reproduced is a candidate cause the run's inputs did not reach — what to
declare a domain for, or to feed with ``--inputs``.

Only error-severity hazards take part: warnings are lint's business. Parent side, no
processes: the caller hands in the lint result.
"""

from __future__ import annotations

from collections.abc import Sequence

from nebisect.detect.causes import RunFinding
from nebisect.hazards.records import LintFinding


def culprit_ops(finding: RunFinding) -> set[str]:
    """The op names a finding's groups blame."""
    return {group.culprit.op for group in finding.groups if group.culprit is not None}


def _names(hazard: LintFinding, ops: set[str]) -> bool:
    """Does ``hazard`` name one of ``ops``: at it, or as the op its message says the
    hazard reaches (``fp16-inf-mask`` sits at the constant, the ``mul`` reading it)?"""
    return hazard.op_name in ops or any(f"'{op}'" in hazard.message for op in ops)


def candidate_lines(findings: Sequence[RunFinding], hazards: Sequence[LintFinding]) -> list[str]:
    """One line per error-severity hazard: the finding it explains (by number), or that
    no finding reproduced it."""
    lines = []
    for hazard in hazards:
        if hazard.severity != "error":
            continue
        where = f"{hazard.rule_id} at {hazard.op_type} '{hazard.op_name}'"
        explained = [f.number for f in findings if _names(hazard, culprit_ops(f))]
        if explained:
            numbers = ", ".join(str(n) for n in explained)
            lines.append(f"lint explains finding {numbers}: {where}: {hazard.message}")
        else:
            lines.append(f"lint candidate (no finding reproduced it): {where}: "
                         f"{hazard.message}")
    return lines

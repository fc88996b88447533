"""Lint rules and findings: the registry every rule family module registers into.

A rule is a function ``check(view) -> Iterable[LintFinding]`` over a
:class:`~nebisect.hazards.graph.ProgramView`, registered with :func:`lint_rule` under a
stable id. The id is what users silence, what SARIF files carry as ``ruleId`` and
what GitHub code scanning keys its alerts on, so ids never change meaning.

Each rule says which nebisect fix cures it (a name from ``nebisect fix list``), or,
where no automatic rewrite exists, a one-line manual remedy; and it cites the public
report that makes the hazard real — a lint rule without a documented failure behind
it is noise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nebisect.fixes import FIXES
from nebisect.hazards.graph import ProgramView
from nebisect.hazards.records import SEVERITIES, Check, LintFinding, Rule
from nebisect.registry import ImportOnce, Registry

#: The rule family modules; each registers its rules on import.
FAMILY_MODULES = (
    "nebisect.hazards.overflow",
    "nebisect.hazards.logdomain",
    "nebisect.hazards.shapes",
    "nebisect.hazards.constants",
    "nebisect.hazards.ranges",
    "nebisect.hazards.runtime",
)

#: Rules by id; loading imports the rule family modules.
RULES: Registry[str, Rule] = Registry("lint rule", ImportOnce(lambda: FAMILY_MODULES))


def lint_rule(
    id: str,
    *,
    severity: str,
    title: str,
    rationale: str,
    source: str,
    fix: str | None = None,
    remedy: str = "",
) -> Callable[[Check], Check]:
    """Register ``check`` as rule ``id``; duplicate ids and unknown fixes are errors.

    The fix is looked up in the fix registry here, so a typo cannot send users to a fix
    that does not exist.
    """
    if severity not in SEVERITIES:
        raise ValueError(f"rule {id!r}: unknown severity {severity!r}")
    if fix is not None and fix not in FIXES:
        raise ValueError(f"rule {id!r}: unknown fix {fix!r}")
    if fix is None and not remedy:
        raise ValueError(f"rule {id!r}: a rule without a fix needs a remedy")

    def decorate(check: Check) -> Check:
        RULES.register(id, Rule(id, severity, title, rationale, source, fix, remedy, check))
        return check

    return decorate


def registered_rules() -> dict[str, Rule]:
    """Every registered rule by id, in id order (rule modules imported first)."""
    return dict(RULES.items())


def get_rule(rule_id: str) -> Rule:
    """The rule registered as ``rule_id``; an unknown id is a user error naming the known ones."""
    return RULES.get(rule_id)


def finding(view: ProgramView, rule_id: str, op: Any, message: str, *,
            severity: str | None = None, **details: Any) -> LintFinding:
    """A finding of ``rule_id`` at ``op`` of ``view`` with the rule's default severity
    and fix."""
    rule = get_rule(rule_id)
    return LintFinding(
        rule_id=rule_id,
        severity=severity or rule.severity,
        message=message,
        function=view.function_of(op),
        op_name=op.name,
        op_type=op.op_type,
        fix=rule.fix,
        details=details,
    )

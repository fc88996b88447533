"""Runtime rules: what the Core ML runtime refuses, or computes otherwise, per op.

coremltools converts and saves programs that Core ML then refuses when it loads or plans
them, or computes differently from the op definition; public coremltools and ExecuTorch
issues document each case. A :class:`RuntimeRule` is the data of one such report: the op
and the parameters, dtypes or ranks that trigger it (a predicate over the MIL op), the
stage and compute units it applies to, the exact published error text (or, for a rule
that computes, what the runtime computes) and the report. Rules are registered with
:func:`runtime_rule` in :mod:`nebisect.mil.semantics.published`.

One validator reads them: :func:`first_refusal` walks a program in order and returns the
first op that breaks a refusing rule on the unit it runs on. The simulator's plan calls
it under the ``coreml`` semantics (``:spec`` applies none); a ``sim:*`` target raises it
at the rule's stage with the device's wording; ``nebisect lint`` reports every op that
breaks a rule, before any prediction. Kernels never test a rule: a rule that computes is
a kernel variant (:mod:`nebisect.mil.semantics.coreml`), and its record here is what lint
reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from nebisect.registry import ImportOnce, Registry

#: The compute units a rule can name: Core ML's CPU, GPU and Neural Engine.
COMPUTE_UNITS = frozenset({"cpu", "gpu", "ne"})
#: Stages in the order the runtime reaches them (Core ML reports the first refusal).
STAGES = ("load", "plan", "predict")


@dataclass(frozen=True)
class RuntimeRule:
    """One published runtime behaviour: an op the runtime refuses or computes otherwise."""

    name: str
    op_type: str
    #: the parameters / dtypes / ranks that trigger it, in words
    trigger: str
    stage: str
    units: frozenset[str]
    #: a refusal's published error text (``{op}`` where the runtime names the op);
    #: for a rule that computes, what it computes
    message: str
    #: the public report(s): "coremltools #2772, PR #2844"
    source: str
    #: how to write the model so that the rule does not apply
    remedy: str
    #: True: the runtime refuses (an error at ``stage``); False: it computes otherwise
    refuses: bool
    applies: Callable[[Any], bool] = field(compare=False, repr=False)

    @property
    def tag(self) -> str:
        """``[linear; coremltools issue #2575]``: how a refusal's text names its rule."""
        return f"[{self.op_type}; {self.source}]"


@dataclass(frozen=True)
class Refusal:
    """A program op that breaks a refusing rule on the unit it runs on."""

    rule: RuntimeRule
    op_name: str
    unit: str

    @property
    def text(self) -> str:
        """The device's error text and the report, then a line naming the op and unit.

        The first line is what identifies the bug (a verdict's signature reads only it):
        the runtime's wording with what varies between conversions masked — the op's name
        (``<op>``), as the path is — so that both conversion paths and every target
        refusing the op report one signature, one root cause."""
        rule = self.rule
        first = f"{rule.message.replace('{op}', '<op>')} {rule.tag}"
        return f"{first}\nat {rule.op_type} '{self.op_name}' on {self.unit}"


#: Rules by name; loading imports the module registering the published ones.
RUNTIME_RULES: Registry[str, RuntimeRule] = Registry(
    "runtime rule", ImportOnce(lambda: ("nebisect.mil.semantics.published",))
)


def runtime_rule(
    name: str, *, op_type: str, trigger: str, stage: str, units: frozenset[str], message: str,
    source: str, remedy: str, refuses: bool = True,
) -> Callable[[Callable[[Any], bool]], Callable[[Any], bool]]:
    """Register the predicate ``applies(op)`` as rule ``name``; a duplicate name, an
    unknown stage or unit, or a rule without its source is an error."""
    if stage not in STAGES:
        raise ValueError(f"runtime rule {name!r}: unknown stage {stage!r}")
    if not units or not units <= COMPUTE_UNITS:
        raise ValueError(
            f"runtime rule {name!r}: units must be a subset of {sorted(COMPUTE_UNITS)}")
    if not source or not message:
        raise ValueError(f"runtime rule {name!r}: a rule cites its report and its message")

    def decorate(applies: Callable[[Any], bool]) -> Callable[[Any], bool]:
        RUNTIME_RULES.register(name, RuntimeRule(
            name, op_type, trigger, stage, units, message, source, remedy, refuses, applies))
        return applies

    return decorate


def runtime_rules() -> list[RuntimeRule]:
    """Every registered rule, in name order."""
    return [rule for _, rule in sorted(RUNTIME_RULES.items())]


def rule_named_in(message: str) -> RuntimeRule | None:
    """The refusing rule whose tag ``message`` carries (a verdict's text), if any."""
    return next((rule for rule in runtime_rules() if rule.refuses and rule.tag in message),
                None)


def broken_rules(block: Any) -> dict[str, tuple[str, ...]]:
    """Op name → the names of the rules it breaks (on some unit), for every op of
    ``block`` breaking one: what a failure's culprit op is checked against."""
    found: dict[str, tuple[str, ...]] = {}
    rules = runtime_rules()
    for op in program_ops(block):
        names = tuple(rule.name for rule in rules if rule.op_type == op.op_type
                      and rule.applies(op))
        if names:
            found[op.name] = names
    return found


def program_ops(block: Any) -> Iterator[Any]:
    """Every non-const op of ``block``, nested blocks included, in program order."""
    for op in block.operations:
        if op.op_type != "const":
            yield op
        for sub in op.blocks:
            yield from program_ops(sub)


def first_refusal(function: Any, unit_of: Callable[[Any], str | None]) -> Refusal | None:
    """The refusal the runtime reports for ``function``: among the ops breaking a refusing
    rule on their unit (``unit_of(op)``; None: the op runs nowhere a rule names), the one
    of the earliest stage, first in program order."""
    by_op: dict[str, list[RuntimeRule]] = {}
    for rule in runtime_rules():
        if rule.refuses:
            by_op.setdefault(rule.op_type, []).append(rule)
    found: list[tuple[int, int, Refusal]] = []
    for index, op in enumerate(program_ops(function)):
        unit = unit_of(op)
        for rule in by_op.get(op.op_type, ()):
            if unit in rule.units and rule.applies(op):
                found.append((STAGES.index(rule.stage), index, Refusal(rule, op.name, unit)))
    return min(found, key=lambda item: item[:2])[2] if found else None

"""The run's findings as text lines (rich markup): findings, cliffs, predictions.

One block per finding (:mod:`nebisect.detect.causes`): a bug seen at 40 input sets, on
three targets and both conversion paths, is one finding with its smallest input and a
line per target saying where it shows — not 240 lines, nor six groups.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from rich.markup import escape

from nebisect.detect.causes import RunFinding
from nebisect.detect.culprit import BY_TORCH
from nebisect.detect.findings import Row
from nebisect.errors import CannotJudge
from nebisect.inputs.guided import Margin
from nebisect.mil.semantics.rules import RUNTIME_RULES, rule_named_in
from nebisect.search.cliff import Cliff
from nebisect.search.readout import Element
from nebisect.search.records import CliffFinding, Exploration, FailureGroup
from nebisect.sources.convert import CURED_PREFIX, PATH_LABELS
from nebisect.sources.converter_overrides import overrides_hint
from nebisect.sources.domains import input_range_option


def where(attribution: str, group: FailureGroup) -> str:
    """``device at reduce_log_sum_exp "var_12"`` (the attribution alone without a culprit)."""
    culprit = f" at {group.culprit.describe()}" if group.culprit else ""
    return f"{attribution or 'unattributed'}{culprit}"


def finding_lines(finding: RunFinding, *, next_command: str = "") -> list[str]:
    """One finding: its title, where it shows (target × path: the smallest failing input
    set, or pass), its smallest trigger, the converter overrides when they cure its
    conversion failure, the runtime rule and its remedy when the device refuses the
    program, its cliffs, and the command that bisects it."""
    lines = [f"[red]✗ {finding.number}[/] [bold]{escape(finding.title)}[/]"]
    width = max((len(target) for target in finding.shows), default=0)
    for target, paths in finding.shows.items():
        cells = "  ".join(
            f"{PATH_LABELS.get(path, path)} {label}" if path else label
            for path, label in paths.items())
        lines.append(escape(f"    {target:<{width}}  {cells}"))
    group = finding.representative
    count = len({m.label for g in finding.groups for m in g.members})
    lines.append(escape(
        f"    smallest trigger {group.smallest.label} on {group.target}"
        f"{f' [{PATH_LABELS.get(group.path, group.path)}]' if group.path else ''}"
        f"{f' at {group.culprit.describe()}' if group.culprit else ''}; "
        f"{count} failing input set{'s' if count != 1 else ''}"))
    hint = overrides_hint(finding.message) if finding.attribution == "conversion" else ""
    if hint and finding.message.startswith(CURED_PREFIX):
        hint = ("a known coremltools incompatibility that nebisect's converter overrides "
                "cure: this run judged the program converted with them "
                "(--converter-overrides: with them from the start, no such finding; "
                "--strict-conversion: the failure ends the path)")
    if hint:
        lines.append(escape(f"    {hint}"))
    rule = rule_named_in(finding.message) if finding.symptom == "error" else None
    if rule is not None:
        lines.append(escape(f"    the runtime's rule {rule.name} ({rule.trigger}); "
                            f"remedy: {rule.remedy}"))
    for name in group.culprit.rules if group.culprit else ():
        known = RUNTIME_RULES.get(name)
        lines.append(escape(f"    at this op the runtime's rule {name} applies: {known.message} "
                            f"({known.source}); remedy: {known.remedy}"))
    shown = dict.fromkeys(
        f"    {target}{f' [{PATH_LABELS.get(c.path, c.path)}]' if c.path else ''}: "
        f"{cliff_line(c)}" for target, c in finding.cliffs)
    lines += [escape(line) for line in shown]
    culprit = group.culprit
    if culprit is not None and (not culprit.matched or culprit.compared.startswith(BY_TORCH)):
        lines.append(escape(f"    culprit from {culprit.compared}"))
    if next_command:
        lines.append(escape(f"    next: {next_command}"))
    return lines


def cliff_line(finding: CliffFinding) -> str:
    """``cliff in const: x 7.62109375 | 7.625 (output 11.0859 | 0 at linear_0[0, 0]),
    2 probes, 0 of them fresh predictions; theory log(65504/32) = 7.62413`` — or, for a
    bracket the exploration stopped short of adjacent values, ``failing from x 10.0 in
    signed (passes at 1.0; not localized: 3328 fp16 steps apart, budget of 40
    predictions spent), …``."""
    cliff: Cliff = finding.cliff
    text = (f"{bracket_text(cliff, f' in {finding.family}', finding.stopped)}, "
            f"{cliff.predictions} probes, {finding.spent} of them fresh predictions")
    if cliff.predicted is not None:
        text += f"; theory {cliff.predicted['label']} = {cliff.predicted['value']:.6g}"
    return text


def bracket_text(cliff: Cliff, where: str = "", stopped: str | None = None) -> str:
    """A localized bracket as a cliff — two adjacent values whose verdicts differ, with
    the output on each side at the element that breaks — or, when the bisection stopped
    short of adjacent values, the value the family is known to fail from, the one it
    passes at and why it stopped: ``cliff{where}: x lo | hi (output a | b at e)`` or
    ``failing from x f{where} (passes at p; not localized: n fp16 steps apart, why)``."""
    if cliff.ulps == 1:
        return f"cliff{where}: x {cliff.lo!r} | {cliff.hi!r} ({sides(cliff)})"
    failing, passing = (cliff.lo, cliff.hi) if cliff.lo_fails else (cliff.hi, cliff.lo)
    why = f", {stopped}" if stopped else ""
    return (f"failing from x {failing!r}{where} (passes at {passing!r}; not localized: "
            f"{cliff.ulps} {cliff.grid} steps apart{why})")


def sides(cliff: Cliff) -> str:
    """``output 11.0859 | 0 at linear_0[0, 0]``: the two sides' outputs, in enough
    digits to tell them apart, at the element they are read at."""
    lo, hi = _number(cliff.lo_output), _number(cliff.hi_output)
    shown = [_value(lo), _value(hi)]
    if shown[0] == shown[1] and lo != hi:
        shown = [repr(lo), repr(hi)]
    at = "" if cliff.element is None else f" at {Element.from_dict(cliff.element)}"
    return f"output {shown[0]} | {shown[1]}{at}"


def prediction_lines(explorations: dict[str, Exploration]) -> list[str]:
    """Where the exploration's predictions went: per target, per family."""
    if not explorations:
        return []
    total = sum(e.spent for e in explorations.values())
    lines = [f"explored: {total} predictions"]
    for target, exploration in explorations.items():
        spent = ", ".join(f"{name} {tally.predictions}" for name, tally in
                          exploration.families.items() if tally.predictions)
        stopped = f"; {exploration.stopped}" if exploration.stopped else ""
        lines.append(f"  {target}: {exploration.spent} ({spent}){stopped}")
    return lines


def cache_lines(result: object) -> list[str]:
    """Where each conversion of a torch source came from when conversions are cached
    (``run --cache``): read from the cache (nothing converted) or converted and kept
    there, and an entry found there that was not trusted."""
    from nebisect.verdict import Verdict

    conversions: dict[str, Verdict] = getattr(result, "conversions", {})
    return [escape(f"conversion {precision}: {verdict.conversion.cache}")
            for precision, verdict in conversions.items()
            if verdict.conversion is not None and verdict.conversion.cache]


def state_lines(result: object) -> list[str]:
    """The states of a stateful model and how many predictions each input set was
    judged over (a torch source's are the buffers its ``forward`` updates in place,
    converted as ``ct.StateType`` states); nothing for a model without state."""
    from nebisect.case import torch_form

    states: list[str] = getattr(result, "states", [])
    if not states:
        return []
    steps = getattr(result, "steps", 0)
    names = ", ".join(states)
    what = (f"buffers updated in place by forward, converted as ct.StateType states: {names}"
            if torch_form(getattr(result, "source", "")) else f"states: {names}")
    return [escape(f"stateful: {what}; each input set judged over {steps} successive "
                   "predictions, the states carried (--steps)")]


def domain_lines(result: object) -> list[str]:
    """The roles read off the graph, margins beyond the declared domains, which outputs
    followed a mask, and — when
    something failed on inputs without a declared domain — how to declare one."""
    margins: list[Margin] = getattr(result, "margins", [])
    lines = [escape(f"input read off the graph: {role.describe()}")
             for role in getattr(result, "input_roles", [])]
    lines += [escape(f"margin: {margin.describe()}") for margin in margins]
    masked: dict[str, str] = getattr(result, "masked_outputs", {})
    if masked:
        how = "inferred from their [batch, seq, …] shapes" if getattr(
            result, "masks_inferred", False) else "as declared"
        pairs = ", ".join(f"{output} by {mask}" for output, mask in masked.items())
        lines.append(escape(f"padded positions not compared ({how}): {pairs}"))
    undeclared: list[str] = getattr(result, "undeclared", [])
    if undeclared and getattr(result, "findings", None):
        names = ", ".join(shlex.quote(name) for name in undeclared)
        lines.append(escape(
            f"no input domain declared for {names}: findings above are ranked by their "
            f"smallest trigger, and some may lie beyond any value the model sees; declare "
            f"one with {input_range_option(undeclared[0])} or 'input_domains' in the "
            "factory"))
    return lines


def _number(value: object) -> float | None:
    """A side's output as a number: a plain value, or the ``output`` of a fuzz
    evaluation's description."""
    if isinstance(value, dict):
        value = value.get("output")
    return None if value is None else float(value)  # type: ignore[arg-type]


def _value(value: float | None) -> str:
    return "-" if value is None else format(value, ".6g")


def gaps(rows: Iterable[Row]) -> dict[str, list[str]]:
    """What nebisect could not judge (:class:`~nebisect.errors.CannotJudge`), each gap
    once with the targets it kept from judging, in the rows' order."""
    found: dict[str, list[str]] = {}
    for row in rows:
        message = row.verdict.message
        if row.verdict.status == "skipped" and message.startswith(CannotJudge.PREFIX):
            targets = found.setdefault(message, [])
            if row.target not in targets:
                targets.append(row.target)
    return found


def gap_lines(rows: Iterable[Row]) -> list[str]:
    """One line per gap (plain text): never a finding, said beside them."""
    return [f"{message} ({', '.join(targets)})" for message, targets in gaps(rows).items()]

"""The run's findings as text lines (rich markup): failure groups, cliffs, predictions.

The matrix table shows the input sets every run evaluates (``example``, the lengths);
what the exploration found is summarized here, one block per failure group, so a bug
seen at 40 input sets is one finding with its smallest input, not 40 lines.
"""

from __future__ import annotations

from rich.markup import escape

from nebisect.detect.findings import FailureGroup
from nebisect.fixes.converter_compat import overrides_hint
from nebisect.inputs.guided import Margin
from nebisect.search.cliff import Cliff
from nebisect.search.records import CliffFinding, Exploration
from nebisect.sources.convert import PATH_LABELS

#: input sets named in full before "… and N more"
SHOWN_MEMBERS = 6


def where(attribution: str, group: FailureGroup) -> str:
    """``device at reduce_log_sum_exp "var_12"`` (the attribution alone without a culprit)."""
    culprit = f" at {group.culprit.describe()}" if group.culprit else ""
    return f"{attribution or 'unattributed'}{culprit}"


def path_note(group: FailureGroup, groups: list[FailureGroup]) -> str:
    """``, jit.trace path only`` when the same target passes on its other path (not when
    another path did not convert: nothing says it would have passed)."""
    if not group.path or any(g.path not in ("", group.path) and g.signature.startswith(
            "error:convert:") for g in groups):
        return ""
    others = {g.path for g in groups if g.target == group.target and g.signature ==
              group.signature and g.attribution == group.attribution}
    return f", {PATH_LABELS.get(group.path, group.path)} path only" if others == {group.path} \
        else ""


def group_lines(group: FailureGroup, groups: list[FailureGroup], *,
                multipath: bool) -> list[str]:
    """The header line of one group, its input sets, the converter overrides when they
    cure its conversion failure, its cliffs."""
    path = escape(f" [{PATH_LABELS.get(group.path, group.path)}]") if group.path else ""
    note = path_note(group, groups) if multipath else ""
    lines = [f"[red]✗[/] {group.target}{path}: {escape(group.signature)} — "
             f"[bold]{escape(where(group.attribution, group))}[/]{note}"]
    labels = [m.label for m in group.members]
    shown = ", ".join(labels[:SHOWN_MEMBERS])
    more = f", … and {len(labels) - SHOWN_MEMBERS} more" if len(labels) > SHOWN_MEMBERS else ""
    if group.path and group.signature.startswith("error:convert:"):
        lines.append(escape(f"    {group.message}"))  # this path alone; the others' verdicts
    lines.append(escape(f"    smallest {group.smallest.label}; {len(labels)} input set"
                        f"{'s' if len(labels) != 1 else ''}: {shown}{more}"))
    hint = overrides_hint(group.message) if group.attribution == "conversion" else ""
    if hint:
        lines.append(escape(f"    {hint}"))
    lines += [escape(f"    {cliff_line(c)}") for c in group.cliffs]
    if group.culprit is not None and not group.culprit.matched:
        lines.append(f"    culprit from {group.culprit.compared}")
    return lines


def cliff_line(finding: CliffFinding) -> str:
    """``cliff in const: x 7.62109375 | 7.625 (output 11.1 | 0), 17 predictions; …``"""
    cliff: Cliff = finding.cliff
    bracket = f"{cliff.lo!r} | {cliff.hi!r}" + ("" if finding.complete else
                                               f" ({cliff.ulps} fp16 steps apart)")
    text = (f"cliff in {finding.family}: x {bracket} (output {_value(cliff.lo_output)} | "
            f"{_value(cliff.hi_output)}), {cliff.predictions} probes, {finding.spent} of them "
            "fresh predictions")
    if cliff.predicted is not None:
        text += f"; theory {cliff.predicted['label']} = {cliff.predicted['value']:.6g}"
    return text


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


def domain_lines(result: object) -> list[str]:
    """Margins beyond the declared domains, which outputs followed a mask, and — when
    something failed on inputs without a declared domain — how to declare one."""
    margins: list[Margin] = getattr(result, "margins", [])
    lines = [escape(f"margin: {margin.describe()}") for margin in margins]
    masked: dict[str, str] = getattr(result, "masked_outputs", {})
    if masked:
        how = "inferred from their [batch, seq, …] shapes" if getattr(
            result, "masks_inferred", False) else "as the factory declares"
        pairs = ", ".join(f"{output} by {mask}" for output, mask in masked.items())
        lines.append(escape(f"padded positions not compared ({how}): {pairs}"))
    undeclared: list[str] = getattr(result, "undeclared", [])
    if undeclared and getattr(result, "groups", None):
        names = ", ".join(undeclared)
        example = undeclared[0]
        lines.append(escape(
            f"no input domain declared for {names}: findings above are ranked by their "
            f"smallest trigger, and some may lie beyond any value the model sees; declare "
            f"one with --input-range {example}=LO:HI or 'input_domains' in the factory"))
    return lines


def _value(value: object) -> str:
    return "-" if value is None else format(float(value), ".6g")  # type: ignore[arg-type]

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
from nebisect.search.readout import Element
from nebisect.search.records import CliffFinding, Exploration
from nebisect.sources.convert import PATH_LABELS

#: input sets named in full before "… and N more"
SHOWN_MEMBERS = 6


def where(attribution: str, group: FailureGroup) -> str:
    """``device at reduce_log_sum_exp "var_12"`` (the attribution alone without a culprit)."""
    culprit = f" at {group.culprit.describe()}" if group.culprit else ""
    return f"{attribution or 'unattributed'}{culprit}"


def path_note(group: FailureGroup, groups: list[FailureGroup]) -> str:
    """``, jit.trace path only`` when the same target passes on its other path."""
    if not group.path:
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


def _number(value: object) -> float | None:
    """A side's output as a number: a plain value, or the ``output`` of a fuzz
    evaluation's description."""
    if isinstance(value, dict):
        value = value.get("output")
    return None if value is None else float(value)  # type: ignore[arg-type]


def _value(value: float | None) -> str:
    return "-" if value is None else format(value, ".6g")

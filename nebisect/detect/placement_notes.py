"""Placement as information: where a run's targets placed ops off their device, one line each.

A target that places ops on a device (``sim:ane``, ``coreml:ne``, …) reports, per
prediction, how many compute ops ran there (``routed``) and the compute ops placed
elsewhere, counted per op type and reason (``off_device``,
:func:`nebisect.targets.placement.off_device`). Placement is a property of the program,
not of the inputs, so a run says it once per target and conversion path (once per
target when its paths agree)::

    placement on sim:ane: 0/2 compute ops on ne; elsewhere: add ×1 (integer dtype),
    mul ×1 (integer dtype) — a note, not a failure (run --require ne fails closed)

The suffix appears where the placement would have been ``unrouted`` had the run asked
for the device (``placement_note`` in the verdict's target facts).
"""

from __future__ import annotations

from collections.abc import Iterable

from nebisect.detect.findings import Row
from nebisect.sources.convert import PATH_LABELS
from nebisect.targets.placement import required_devices


def placement_lines(rows: Iterable[Row]) -> list[str]:
    """One line per target (per target and path when its paths differ) with ops off its
    device, in the order the rows first show them."""
    seen: dict[str, dict[str, tuple[str, dict[str, int], str]]] = {}
    for row in rows:
        reported = row.verdict.target_facts
        if row.role != "target" or not reported.off_device:
            continue
        facts = (reported.routed, dict(reported.off_device), reported.placement_note)
        seen.setdefault(row.target, {}).setdefault(row.path, facts)
    lines = []
    for target, by_path in seen.items():
        distinct = {repr(facts) for facts in by_path.values()}
        for path, facts in by_path.items():
            label = f" [{PATH_LABELS.get(path, path)}]" if path and len(distinct) > 1 else ""
            lines.append(_line(target, label, *facts))
            if len(distinct) == 1:
                break
    return lines


def _line(target: str, label: str, routed: str, away: dict[str, int], note: str) -> str:
    elsewhere = ", ".join(_counted(what, n) for what, n in away.items())
    text = f"placement on {target}{label}: {routed}; elsewhere: {elsewhere}"
    if note:
        devices = " or ".join(f"--require {d}" for d in required_devices(target))
        text += f" — a note, not a failure (run {devices} fails closed)"
    return text


def _counted(what: str, count: int) -> str:
    """``add (integer dtype)``, 2 → ``add ×2 (integer dtype)``."""
    kind, paren, reason = what.partition(" (")
    return f"{kind} ×{count}" + (f" ({reason}" if paren else "")

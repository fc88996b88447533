"""Two atlases compared: what an upgrade of coremltools (or torch) fixes and breaks.

Samples are matched by (op, index, call). A sample's failures are its
``column: signature`` failures on each conversion path
(:meth:`~nebisect.atlas.records.AtlasEntry.failures`). Per op:

* **fixed** — a failure of a sample before that the same sample no longer has;
* **regressed** — a failure a sample has now that it did not have before;
* **new** — a failure of a sample the earlier atlas did not judge (a new op or sample);
* **unchanged** — a failure both have.

Nothing here runs anything; both atlases come from their JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nebisect.atlas.records import Atlas, AtlasEntry

#: the classes, in the order a table shows them
CHANGES = ("fixed", "regressed", "new", "unchanged")

#: one failure of one sample on one path: (index, call, path, ``column: signature``)
Failure = tuple[str, str, str, str]


@dataclass
class OpChange:
    """One op's failures by class."""

    op: str
    changes: dict[str, list[Failure]] = field(
        default_factory=lambda: {name: [] for name in CHANGES})

    @property
    def changed(self) -> bool:
        return any(self.changes[name] for name in ("fixed", "regressed", "new"))


def _failures(entry: AtlasEntry) -> set[Failure]:
    return {(entry.index, entry.call, path, failure)
            for failure, paths in entry.failures().items() for path in paths}


def diff(before: Atlas, after: Atlas) -> list[OpChange]:
    """Per op of either atlas (``after``'s order, then ops only ``before`` has)."""
    earlier = {(e.op, e.index, e.call): e for e in before.entries if not e.skipped}
    later = {(e.op, e.index, e.call): e for e in after.entries if not e.skipped}
    ops = list(dict.fromkeys([*(key[0] for key in later), *(key[0] for key in earlier)]))
    changes = {op: OpChange(op) for op in ops}
    for key in dict.fromkeys([*later, *earlier]):
        then = _failures(earlier[key]) if key in earlier else set()
        now = _failures(later[key]) if key in later else set()
        change = changes[key[0]].changes
        if key not in earlier:
            change["new"].extend(sorted(now))
            continue
        if key not in later:
            continue  # not judged now: nothing is known of it
        change["fixed"].extend(sorted(then - now))
        change["regressed"].extend(sorted(now - then))
        change["unchanged"].extend(sorted(then & now))
    return list(changes.values())


def diff_rows(changes: list[OpChange]) -> list[list[str]]:
    """A table row per op with any failure: op, then the count of each class."""
    return [[c.op, *(str(len(c.changes[name])) for name in CHANGES)]
            for c in changes if any(c.changes.values())]


def versions(before: Atlas, after: Atlas) -> str:
    """``coremltools 9.0 → 9.1.dev1`` for every version that differs."""
    names = dict.fromkeys([*before.environment, *after.environment])
    return ", ".join(f"{name} {before.environment.get(name, '?')} → "
                     f"{after.environment.get(name, '?')}" for name in names
                     if before.environment.get(name) != after.environment.get(name)) \
        or "same versions"

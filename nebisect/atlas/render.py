"""The atlas as tables: op × conversion path × column, and its distinct failures.

One row per op and path: each column says ``pass`` when every sample passed there, else
the first failing sample's verdict and index; ``finding`` is that sample's first
finding on the path. :func:`markdown` is the summary a maintainer pastes into an issue
(every name and message in it from the atlas, which may be a file someone shared, as
inert text: :func:`~nebisect.report.safe_text.markdown_text`); :func:`payload` is the
HTML report's content. Nothing here runs anything.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any

from nebisect.atlas.records import (
    ATLAS_COLUMNS,
    NOT_RUN,
    PASSING,
    Atlas,
    AtlasEntry,
    refused,
)
from nebisect.report.safe_text import markdown_text

TABLE_COLUMNS = ("op", "path", *ATLAS_COLUMNS, "samples", "first failing sample", "finding")
FAILURE_COLUMNS = ("op", "failure", "paths", "samples", "first sample", "call")


def op_rows(atlas: Atlas) -> list[list[str]]:
    """A row per op and conversion path (:data:`TABLE_COLUMNS`)."""
    rows = []
    for op in atlas.ops:
        entries = [e for e in atlas.entries if e.op == op]
        judged = [e for e in entries if not e.skipped]
        paths = list(dict.fromkeys(p for e in judged for p in e.cells))
        if not paths:
            reason = entries[0].skipped if entries else ""
            rows.append([op, NOT_RUN, *(NOT_RUN for _ in ATLAS_COLUMNS), str(len(entries)),
                         "", f"not judged: {reason}"[:160]])
            continue
        for path in paths:
            here = [e for e in judged if path in e.cells]
            first = next((e for e in here if _fails_on(e, path)), None)
            cells = [_column(here, path, column) for column in ATLAS_COLUMNS]
            finding = next((f.title for f in first.findings if path in f.paths), "") \
                if first else ""
            rows.append([op, path, *cells, str(len(here)),
                         f"{first.index}: {first.call}" if first else "", finding])
    return rows


def _fails_on(entry: AtlasEntry, path: str) -> bool:
    return any(path in paths for paths in entry.failures().values())


def _column(entries: list[AtlasEntry], path: str, column: str) -> str:
    """The first failing sample's value in ``column``, else how the samples passed."""
    for entry in entries:
        value = entry.cells[path].get(column, NOT_RUN)
        if value not in PASSING:
            return f"{value} ({entry.index})"
    values = [entry.cells[path].get(column, NOT_RUN) for entry in entries]
    return next((v for v in PASSING if v in values), NOT_RUN)


def failure_rows(atlas: Atlas) -> list[list[str]]:
    """A row per distinct failure (op × failure class × paths, :data:`FAILURE_COLUMNS`)."""
    return [[op, failure, " ".join(paths) or NOT_RUN, str(len(entries)), entries[0].index,
             entries[0].call]
            for (op, failure, paths), entries in atlas.distinct_failures().items()]


def failure_counts(atlas: Atlas) -> dict[str, int]:
    """Distinct failures by class: the column and the verdict's status and kind
    (``fp64 mismatch:tolerance``: the converter's math; ``converts error``)."""
    counts: dict[str, int] = {}
    for _, failure, _ in atlas.distinct_failures():
        column, _, signature = failure.partition(": ")
        kind = ":".join(signature.split(":")[:2]) if signature.startswith("mismatch") \
            else signature.split(":")[0]
        key = f"{column} {kind}"
        counts[key] = counts.get(key, 0) + 1
    return counts


#: the columns of a pattern sweep's coverage, one row per idiom
IDIOM_COLUMNS = ("idiom", "programs", "refused by torch", "convert on both paths", "failing",
                 "distinct failures first shown")
#: the columns of the idiom pairs a pattern sweep reached, one row per pair in order
PAIR_COLUMNS = ("idiom, then idiom", "programs", "refused by torch", "convert on both paths",
                "failing")


def idiom_rows(atlas: Atlas) -> list[list[str]]:
    """Per idiom of a pattern sweep: the judged programs that use it, those torch
    refuses on some path (``not exportable``, ``not traceable``), those that convert on
    both paths, those failing somewhere, and the distinct failures first shown by a
    program that uses it — which patterns were reached, and which the failures sit in."""
    counts = _tallies(atlas, lambda idioms: set(idioms))
    first_shown = dict.fromkeys(counts, 0)
    for op, _, _ in atlas.distinct_failures():
        for name in set(op.split("+")):
            first_shown[name] += 1
    return [[name, *map(str, tally), str(first_shown[name])]
            for name, tally in sorted(counts.items())]


def pair_rows(atlas: Atlas) -> list[list[str]]:
    """Per pair of idioms one right after the other in a program (``a, then b``), the
    same counts as :func:`idiom_rows`: which compositions the sweep reached, failing
    pairs first."""
    counts = _tallies(atlas, lambda idioms: set(pairwise(idioms)))
    ranked = sorted(counts.items(), key=lambda item: (-item[1][3], item[0]))
    return [[f"{first}, then {second}", *map(str, tally)] for (first, second), tally in ranked]


def _tallies(atlas: Atlas, keys: Callable[[list[str]], set[Any]]) -> dict[Any, list[int]]:
    """Per key a program's idioms give (:func:`idiom_rows`' idioms, :func:`pair_rows`'
    pairs): judged programs, refused by torch, converting on both paths, failing."""
    counts: dict[Any, list[int]] = {}
    for entry in atlas.entries:
        if entry.skipped:
            continue
        rows = entry.cells.values()
        tally_of = (1, any(refused(row.get("converts", "")) for row in rows),
                    all(row.get("converts") == "ok" for row in rows), entry.failed)
        for key in keys(entry.op.split("+")):
            tally = counts.setdefault(key, [0] * len(tally_of))
            for column, value in enumerate(tally_of):
                tally[column] += value
    return counts


#: the columns of the axes each op's samples covered
COVERED_COLUMNS = ("op", "dtypes and mutations sampled")


def covered_rows(atlas: Atlas) -> list[list[str]]:
    """Per op, the axes its samples covered: which dtypes, and which of the moves
    converters get wrong (dims from the end, each boolean flipped, constants set to 1)."""
    return [[op, ", ".join(axes)] for op, axes in atlas.covered.items()]


def markdown(atlas: Atlas) -> str:
    """The sweep as Markdown: versions, counts, the distinct failures, the op table."""
    env = markdown_text(", ".join(f"{name} {value}"
                                  for name, value in atlas.environment.items()))
    counts = markdown_text(", ".join(f"{n} {symptom}"
                                     for symptom, n in failure_counts(atlas).items()))
    lines = [
        "## nebisect converter atlas",
        "",
        f"{env}; {len(atlas.ops)} ops, {len(atlas.entries)} samples, "
        f"{len(atlas.distinct_failures())} distinct failures ({counts or 'none'}).",
        "",
        "### Distinct failures",
        "",
        *_markdown_table(FAILURE_COLUMNS, failure_rows(atlas)),
        "",
        *(["### Idioms", "", *_markdown_table(IDIOM_COLUMNS, idiom_rows(atlas)), "",
           "### Idiom pairs", "", *_markdown_table(PAIR_COLUMNS, pair_rows(atlas)), ""]
          if atlas.of_patterns else []),
        *(["### Axes sampled", "", *_markdown_table(COVERED_COLUMNS, covered_rows(atlas)),
           ""] if atlas.covered else []),
        "### Ops",
        "",
        *_markdown_table(TABLE_COLUMNS, op_rows(atlas)),
        "",
    ]
    return "\n".join(lines)


def _markdown_table(columns: tuple[str, ...], rows: list[list[str]]) -> list[str]:
    if not rows:
        return ["(none)"]

    def cell(text: str) -> str:
        return markdown_text(text.replace("\n", " ")).replace("|", "\\|")

    return [f"| {' | '.join(columns)} |", f"|{'---|' * len(columns)}",
            *(f"| {' | '.join(cell(c) for c in row)} |" for row in rows)]


def payload(atlas: Atlas) -> Any:
    """The :class:`nebisect.report.ReportPayload` of a sweep."""
    from nebisect.report import ReportPayload, Table

    return ReportPayload(
        title="nebisect converter atlas",
        summary={**atlas.environment, "ops": len(atlas.ops), "samples": len(atlas.entries),
                 "distinct failures": len(atlas.distinct_failures()),
                 "by class": failure_counts(atlas)},
        tables=[Table("distinct failures", list(FAILURE_COLUMNS), failure_rows(atlas)),
                *([Table("idioms", list(IDIOM_COLUMNS), idiom_rows(atlas)),
                   Table("idiom pairs", list(PAIR_COLUMNS), pair_rows(atlas))]
                  if atlas.of_patterns else []),
                *([Table("axes sampled", list(COVERED_COLUMNS), covered_rows(atlas))]
                  if atlas.covered else []),
                Table("ops", list(TABLE_COLUMNS), op_rows(atlas))],
    )

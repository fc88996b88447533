"""report.html: one self-contained page that opens offline.

No scripts, no external stylesheets, fonts or images: CSS is inline and every plot is
an inline SVG (:mod:`nebisect.report.plots`), so the file can be attached to a CI run
or an issue and opened anywhere. Every piece of text from the payload is escaped.
Plots carry stable element ids (``cliff-sweep-0``, ``divergence-0``,
``run-matrix-0``) that tests and users can link to.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from html import escape
from typing import Any

from nebisect.report.payload import (
    CliffSweep,
    Divergence,
    NamedVerdict,
    ReportFinding,
    ReportPayload,
    RunMatrix,
)
from nebisect.report.plots import STATUS_COLORS, cliff_sweep_svg, divergence_svg, matrix_svg

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;
color:#212121;background:#fafafa}
header{background:#263238;color:#fff;padding:16px 28px}
header h1{margin:0 0 4px;font-size:20px}
header .meta{color:#b0bec5;font-size:12px}
main{padding:8px 28px 40px;max-width:1200px}
section{background:#fff;border:1px solid #e0e0e0;border-radius:6px;margin:18px 0;
padding:12px 18px}
h2{font-size:16px;margin:4px 0 10px}
table{border-collapse:collapse;width:100%;font-size:13px}
th,td{border-bottom:1px solid #eee;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f5f5f5}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;border-radius:10px;padding:1px 9px;color:#fff;font-size:12px;
margin-right:6px}
figure{margin:8px 0}
figcaption{font-size:12px;color:#555}
.plot-svg{max-width:100%;height:auto}
code{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
dl{display:grid;grid-template-columns:max-content auto;gap:2px 16px;margin:0}
dt{font-weight:600}dd{margin:0}
"""


def _badge(status: str, text: str | None = None) -> str:
    color = STATUS_COLORS.get(status, "#546e7a")
    return f'<span class="badge" style="background:{color}">{escape(text or status)}</span>'


def _cell(value: Any) -> str:
    if isinstance(value, float):
        shown = f"{value:.6g}" if math.isfinite(value) else str(value)
        return f'<td class="num">{escape(shown)}</td>'
    if isinstance(value, int) and not isinstance(value, bool):
        return f'<td class="num">{value}</td>'
    return f"<td>{escape('' if value is None else str(value))}</td>"


def _table(columns: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _summary(payload: ReportPayload) -> str:
    items = "".join(
        f"<dt>{escape(str(k))}</dt><dd>{escape(_plain(v))}</dd>" for k, v in payload.summary.items()
    )
    counts = Counter(v.verdict.status for v in payload.verdicts)
    badges = "".join(_badge(s, f"{s}: {n}") for s, n in sorted(counts.items()))
    return (
        '<section id="summary"><h2>Summary</h2>'
        + (f"<p>{badges}</p>" if badges else "")
        + (f"<dl>{items}</dl>" if items else "")
        + "</section>"
    )


def _plain(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(_plain(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}={_plain(v)}" for k, v in value.items())
    return str(value)


def _sweep(sweep: CliffSweep, i: int) -> str:
    facts = []
    if sweep.bracket is not None:
        lo, hi = sweep.bracket
        facts.append(f"cliff between adjacent fp16 values {lo:.7g} | {hi:.7g}")
        if sweep.bracket_outputs is not None:
            a, b = sweep.bracket_outputs
            facts.append(f"output {a:.6g} → {b:.6g}")
    if sweep.predicted_boundary is not None:
        facts.append(f"predicted {sweep.predicted_label or 'boundary'} = "
                     f"{sweep.predicted_boundary:.4f}")
    if sweep.predictions is not None:
        facts.append(f"{sweep.predictions} predictions")
    return (
        f'<figure id="cliff-sweep-{i}" class="plot cliff-sweep">'
        f"{cliff_sweep_svg(sweep, f'cliff-sweep-{i}')}"
        f"<figcaption>{escape('; '.join(facts) or sweep.title)}</figcaption></figure>"
    )


def _divergence(divergence: Divergence, i: int) -> str:
    caption = (
        f"first divergent op: {divergence.first_divergent}"
        if divergence.first_divergent else "no op diverges"
    )
    if divergence.evaluations is not None:
        caption += f"; {divergence.evaluations} evaluations"
    position = next(
        (k for k, op in enumerate(divergence.ops) if op.name == divergence.first_divergent), 0
    )
    window = divergence.ops[max(0, position - 5): position + 6]
    rows = [[op.index, op.name, op.op_type, op.error, "pass" if op.passed else "FAIL"]
            for op in window]
    return (
        f'<figure id="divergence-{i}" class="plot divergence">'
        f"{divergence_svg(divergence, f'divergence-{i}')}"
        f"<figcaption>{escape(caption)}</figcaption></figure>"
        + _table(["#", "op", "type", f"error ({divergence.unit})", ""], rows)
    )


def _matrix(matrix: RunMatrix, i: int) -> str:
    rows = []
    for row in matrix.rows:
        cells = []
        for column in matrix.columns:
            cell = matrix.cell(row, column)
            cells.append(
                "<td></td>" if cell is None else
                f'<td title="{escape(cell.detail)}">{_badge(cell.status, cell.text or None)}</td>'
            )
        rows.append(f"<tr><th>{escape(row)}</th>{''.join(cells)}</tr>")
    head = "".join(f"<th>{escape(c)}</th>" for c in matrix.columns)
    label = f"{matrix.row_label} \\ {matrix.column_label}"
    return (
        f'<figure id="run-matrix-{i}" class="plot run-matrix">'
        f"{matrix_svg(matrix, f'run-matrix-{i}')}</figure>"
        f"<table><thead><tr><th>{escape(label)}</th>{head}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _verdicts(verdicts: list[NamedVerdict]) -> str:
    rows = []
    for named in verdicts:
        v = named.verdict
        ulps = v.error_metrics.max_ulp_error if v.error_metrics else None
        seconds = v.timings.seconds
        rows.append(
            "<tr>" + _cell(named.name) + _cell(named.group) + _cell(v.target)
            + f"<td>{_badge(v.status)}</td>" + f"<td><code>{escape(v.signature)}</code></td>"
            + _cell(v.message[:300]) + _cell(ulps) + _cell(round(seconds, 3)) + "</tr>"
        )
    head = "".join(f"<th>{c}</th>" for c in (
        "name", "group", "target", "status", "signature", "message", "max ULP", "time (s)"))
    return (f'<section id="verdicts"><h2>Verdicts</h2><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></section>")


def _findings(findings: list[ReportFinding]) -> str:
    """Each root cause: its title, then where it shows (target × conversion path)."""
    items = []
    for finding in findings:
        paths = list(dict.fromkeys(p for shown in finding.shows.values() for p in shown))
        rows = [[target, *(shown.get(p, "") for p in paths)]
                for target, shown in finding.shows.items()]
        command = (f'<p class="meta">next: <code>{escape(finding.command)}</code></p>'
                   if finding.command else "")
        items.append(
            f"<li><p><strong>{finding.number}. {escape(finding.title)}</strong></p>"
            f'<p class="meta">smallest trigger {escape(finding.trigger)}</p>'
            f"{_table(['target', *(p or 'program' for p in paths)], rows)}{command}</li>")
    return f"<ol class=\"findings\">{''.join(items)}</ol>"


def _section(section_id: str, title: str, body: str) -> str:
    return f'<section id="{section_id}"><h2>{escape(title)}</h2>{body}</section>'


def _parts(payload: ReportPayload) -> list[str]:
    """The report's sections, in reading order: summary, findings, plots, tables."""
    parts = [_summary(payload)]
    if payload.findings:
        parts.append(_section("findings", "Findings", _findings(payload.findings)))
    for i, matrix in enumerate(payload.matrices):
        parts.append(_section(f"matrix-{i}", matrix.title, _matrix(matrix, i)))
    for i, sweep in enumerate(payload.sweeps):
        parts.append(_section(f"sweep-{i}", sweep.title, _sweep(sweep, i)))
    for i, divergence in enumerate(payload.divergences):
        parts.append(_section(f"bisect-{i}", divergence.title, _divergence(divergence, i)))
    if payload.verdicts:
        parts.append(_verdicts(payload.verdicts))
    for i, table in enumerate(payload.tables):
        parts.append(_section(f"table-{i}", table.title, _table(table.columns, table.rows)))
    if payload.notes:
        items = "".join(f"<li>{escape(n)}</li>" for n in payload.notes)
        parts.append(_section("notes", "Notes", f"<ul>{items}</ul>"))
    return parts


def render_html(document: dict[str, Any], payload: ReportPayload) -> str:
    """The whole page for a report.json ``document`` and the payload it was made from."""
    parts = _parts(payload)
    title = escape(payload.title)
    meta = escape(
        f"nebisect {document['kind']} report · {document['created']} · "
        f"nebisect {document['nebisect_version']} · schema v{document['schema_version']}"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{title}</title><style>{_CSS}</style></head><body>"
        f'<header><h1>{title}</h1><div class="meta">{meta}</div></header>'
        f"<main>{''.join(parts)}</main></body></html>\n"
    )


#: the class of the element a notebook shows a report in; :func:`render_fragment`
#: scopes the page's style to it, so it restyles nothing else in the notebook
FRAGMENT = "nebisect-report"


def render_fragment(payload: ReportPayload) -> str:
    """The report's sections (findings, matrix, plots) as one ``<div>`` a notebook shows
    inline (``_repr_html_``), its style scoped to the ``div``."""
    rules = []
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", _CSS):
        scoped = ",".join(f".{FRAGMENT}" if s.strip() == "body" else f".{FRAGMENT} {s.strip()}"
                          for s in selectors.split(","))
        rules.append(f"{scoped}{{{body}}}")
    return (f'<div class="{FRAGMENT}"><style>{"".join(rules)}</style>'
            f"<h3>{escape(payload.title)}</h3>{''.join(_parts(payload))}</div>")

"""The report's plots, drawn with matplotlib and returned as inline SVG text.

Figures are built with ``matplotlib.figure.Figure`` and its SVG canvas directly, so
no pyplot state or GUI backend is involved (safe in workers and headless CI). Text is
drawn as paths (``svg.fonttype = path``): the SVG needs no font on the machine that
opens the report. The ids matplotlib generates inside an SVG (glyphs, clip paths,
artist groups) are prefixed with the figure's element id, so several SVGs inlined in
one page never share an id; a fixed ``svg.hashsalt`` and no date metadata make the
same data give the same bytes.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager
from html import escape
from typing import Any

import numpy as np

from nebisect.report.payload import CliffSweep, Divergence, RunMatrix

#: the colours of a sweep's further series (one per target), after its own output's blue
_SERIES_COLORS = ("#e65100", "#2e7d32", "#6a1b9a", "#00838f", "#ad1457", "#5d4037")
STATUS_COLORS = {
    "pass": "#2e7d32",
    "mismatch": "#e65100",
    "unrouted": "#f9a825",
    "crash": "#8e0000",
    "error": "#c62828",
    "timeout": "#6a1b9a",
    "oom": "#6a1b9a",
    "skipped": "#9e9e9e",
}


@contextmanager
def _figure(size: tuple[float, float]) -> Iterator[Any]:
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    with matplotlib.rc_context({"svg.hashsalt": "nebisect", "svg.fonttype": "path"}):
        figure = Figure(figsize=size, layout="constrained")
        FigureCanvasSVG(figure)
        yield figure


def _svg(figure: Any, element_id: str, title: str = "") -> str:
    """The figure's SVG element, every internal id prefixed with ``element_id``.

    Its text is drawn as paths, so ``title`` (escaped; names come from user models)
    becomes the SVG's ``<title>``: what a screen reader says and a search finds.
    """
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg"):]
    text = re.sub(r'\bid="([^"]+)"', rf'id="{element_id}-\1"', text)
    text = re.sub(r'href="#([^"]+)"', rf'href="#{element_id}-\1"', text)
    text = re.sub(r"url\(#([^)]+)\)", rf"url(#{element_id}-\1)", text)
    text = re.sub(
        r"<svg ", f'<svg id="{element_id}-svg" class="plot-svg" role="img" ', text, count=1
    )
    if not title:
        return text
    opened = text.index(">", text.index("<svg")) + 1
    return f"{text[:opened]}\n <title>{escape(title)}</title>{text[opened:]}"


def cliff_sweep_svg(sweep: CliffSweep, element_id: str) -> str:
    """Output and reference versus x, with the fp16 bracket and the predicted boundary."""
    x = np.asarray(sweep.x, dtype=np.float64)
    out = np.asarray(sweep.output, dtype=np.float64)
    ref = np.asarray(sweep.reference, dtype=np.float64)
    with _figure((8.0, 4.4)) as figure:
        ax = figure.add_subplot()
        ax.plot(x, ref, color="#616161", linestyle="--", linewidth=1.4,
                label=f"reference ({sweep.reference_target})")
        finite = np.isfinite(out)
        line, = ax.plot(np.where(finite, x, np.nan), np.where(finite, out, np.nan),
                        color="#1565c0", linewidth=1.6, marker="." if x.size <= 200 else None,
                        markersize=3, label=f"output ({sweep.target or 'target'})",
                        zorder=3)  # the sweep's own output stays on top of the other targets
        line.set_gid("series-0")
        for k, (name, values) in enumerate(sweep.series.items()):
            line, = ax.plot(x, np.asarray(values, dtype=np.float64), linewidth=1.2,
                            marker=".", markersize=4, color=_SERIES_COLORS[k % 6],
                            label=f"output ({name})")
            line.set_gid(f"series-{k + 1}")
        if not finite.all():
            floor = float(np.nanmin(np.where(np.isfinite(ref), ref, np.nan), initial=0.0))
            ax.plot(x[~finite], np.full(int((~finite).sum()), floor), "x", color="#c62828",
                    markersize=4, label="non-finite output (drawn at the floor)")
        if sweep.bracket is not None:
            lo, hi = sweep.bracket
            ax.axvspan(lo, hi, color="#c62828", alpha=0.25)
            ax.axvline((lo + hi) / 2, color="#c62828", linewidth=1.2,
                       label=f"fp16 bracket [{lo:.7g}, {hi:.7g}]")
        if sweep.predicted_boundary is not None and math.isfinite(sweep.predicted_boundary):
            label = sweep.predicted_label or "predicted boundary"
            ax.axvline(sweep.predicted_boundary, color="#2e7d32", linestyle=":", linewidth=1.6,
                       label=f"{label} = {sweep.predicted_boundary:.4f}")
        ax.set_xlabel(sweep.x_label)
        ax.set_ylabel(sweep.y_label)
        ax.set_title(sweep.title)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="best", fontsize=8)
        return _svg(figure, element_id, _sweep_title(sweep))


def _sweep_title(sweep: CliffSweep) -> str:
    """The plot's title, its series and its bracket (exact values) as one line."""
    facts = [sweep.title, "series: " + ", ".join([sweep.target or "target", *sweep.series])]
    if sweep.bracket is not None:
        facts.append("fp16 bracket {!r} | {!r}".format(*map(float, sweep.bracket)))
    return "; ".join(facts)


def divergence_svg(divergence: Divergence, element_id: str) -> str:
    """Per-op error bars in topological order (log scale), the first divergence marked."""
    errors = np.asarray([op.error for op in divergence.ops], dtype=np.float64)
    index = np.asarray([op.index for op in divergence.ops])
    finite = errors[np.isfinite(errors)]
    top = max(float(finite.max(initial=1.0)) * 10.0, 10.0)
    floor = 1e-3
    heights = np.where(np.isfinite(errors), np.maximum(errors, floor), top)
    colors = ["#2e7d32" if op.passed else "#c62828" for op in divergence.ops]
    with _figure((8.0, 4.0)) as figure:
        ax = figure.add_subplot()
        bars = ax.bar(index, heights, color=colors, width=0.8)
        for bar, error in zip(bars, errors, strict=True):
            if not np.isfinite(error):
                bar.set_hatch("//")
        ax.set_yscale("log")
        ax.set_ylim(floor / 2, top * 2)
        if divergence.threshold is not None:
            ax.axhline(divergence.threshold, color="#616161", linestyle="--", linewidth=1.0,
                       label=f"tolerance {divergence.threshold:g} {divergence.unit}")
        first = next((op for op in divergence.ops if op.name == divergence.first_divergent),
                     None)
        if first is not None:
            ax.annotate(
                f"first divergence: {first.name} ({first.op_type})",
                xy=(first.index, heights[divergence.ops.index(first)]),
                xytext=(0.02, 0.92), textcoords="axes fraction", fontsize=9,
                arrowprops={"arrowstyle": "->", "color": "#c62828"},
            )
        if len(divergence.ops) <= 40:
            ax.set_xticks(index, [op.op_type for op in divergence.ops], rotation=60,
                          fontsize=7, ha="right")
        ax.set_xlabel("op (topological order)")
        ax.set_ylabel(f"error ({divergence.unit}; hatched = non-finite)")
        ax.set_title(divergence.title)
        if divergence.threshold is not None:
            ax.legend(loc="upper right", fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
        shown = f"first divergence: {first.name} ({first.op_type})" if first else "no divergence"
        return _svg(figure, element_id, f"{divergence.title}; {shown}")


def matrix_svg(matrix: RunMatrix, element_id: str) -> str:
    """The run matrix as a grid of status-coloured cells."""
    from matplotlib.patches import Rectangle

    rows, columns = matrix.rows, matrix.columns
    width = min(2.0 + 1.2 * len(columns), 12.0)
    height = min(1.4 + 0.45 * len(rows), 10.0)
    with _figure((width, height)) as figure:
        ax = figure.add_subplot()
        for r, row in enumerate(rows):
            for c, column in enumerate(columns):
                cell = matrix.cell(row, column)
                color = STATUS_COLORS.get(cell.status, "#ffffff") if cell else "#ffffff"
                ax.add_patch(Rectangle((c, r), 1, 1, facecolor=color, edgecolor="white"))
                if cell is not None:
                    ax.text(c + 0.5, r + 0.5, cell.text or cell.status, ha="center",
                            va="center", fontsize=8, color="white")
        ax.set_xlim(0, len(columns))
        ax.set_ylim(len(rows), 0)
        ax.set_xticks([c + 0.5 for c in range(len(columns))], columns, fontsize=8)
        ax.set_yticks([r + 0.5 for r in range(len(rows))], rows, fontsize=8)
        ax.set_xlabel(matrix.column_label)
        ax.set_ylabel(matrix.row_label)
        ax.set_title(matrix.title)
        ax.tick_params(length=0)
        for spine in ax.spines.values():
            spine.set_visible(False)
        return _svg(figure, element_id)

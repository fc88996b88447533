"""The run report's plots (issue 12, item 10): the model-level cliff of seed 000's model
on every target with its fp16 bracket, and the per-op divergence chart of each failure
group with its culprit marked; op names from a user's model are escaped."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

from nebisect.report import write_report
from nebisect.report.payload import Divergence, ReportPayload
from nebisect.search.divergence import OpError


@pytest.fixture(scope="module")
def seed_000_html(tmp_path_factory: pytest.TempPathFactory) -> str:
    """report.html of the default ``run`` of seed 000's model (simulator targets)."""
    report = tmp_path_factory.mktemp("report") / "run"
    done = subprocess.run(
        [sys.executable, "-m", "nebisect", "run", "examples/logsumexp_ne.py:model",
         "-t", "sim:fp32", "-t", "sim:fp16", "-t", "sim:ane", "--report", str(report)],
        capture_output=True, text=True, cwd=REPO, timeout=900)
    assert done.returncode == 1, done.stderr
    return (report / "report.html").read_text()


def _figures(html: str, kind: str) -> list[str]:
    return re.findall(rf'<figure id="{kind}-\d+".*?</figure>', html, flags=re.S)


@pytest.mark.slow
def test_the_cliff_plot_marks_the_bracket_with_one_series_per_target(seed_000_html: str) -> None:
    plots = [f for f in _figures(seed_000_html, "cliff-sweep") if "7.62109375 | 7.625" in f]
    # The const cliff of sim:ane, on each conversion path (both convert).
    assert len(plots) == 2
    for plot in plots:
        svg = plot[plot.index("<svg"):]
        title = re.search(r"<title>(.*?)</title>", svg)
        assert title is not None and "fp16 bracket 7.62109375 | 7.625" in title.group(1)
        assert "series: sim:ane, sim:fp64, sim:fp32, sim:fp16" in title.group(1)
        # sim:fp64 is the exact row a torch source always gets: four targets, four lines.
        assert len(re.findall(r'id="cliff-sweep-\d+-series-\d+"', svg)) == 4


@pytest.mark.slow
def test_each_failure_group_has_a_divergence_chart_naming_its_culprit(
    seed_000_html: str,
) -> None:
    charts = _figures(seed_000_html, "divergence")
    culprits = [re.search(r"first divergence: (\S+) \(reduce_log_sum_exp\)</title>", chart)
                for chart in charts]
    # One chart per failure group: the device collapse on each conversion path.
    assert len(charts) == 2 and all(culprits)
    assert "logsumexp_cast_fp16" in {c.group(1) for c in culprits if c}


def test_op_names_are_escaped_in_the_divergence_chart(tmp_path: Path) -> None:
    ops = [OpError(0, "x_cast", "cast", 0.0, True),
           OpError(1, "<script>alert(1)</script>", "reduce_log_sum_exp", 4096.0, False)]
    payload = ReportPayload(title="escape", divergences=[Divergence(
        "a hostile op name", ops, first_divergent="<script>alert(1)</script>")])
    html = write_report(tmp_path / "r", "run", payload).html.read_text()
    assert "<script" not in html
    assert "first divergence: &lt;script&gt;alert(1)&lt;/script&gt;" in html

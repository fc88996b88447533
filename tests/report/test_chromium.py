"""A fuzz report opened in a real browser: Debian's headless Chromium, a fresh profile,
no network. The screenshot must not be blank, the cliff plot must be in the DOM and
its curve must be on screen."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest
import support.report_payloads as rp

from nebisect.report import write_report

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",
]

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian's chromium is not installed at /usr/bin/chromium "
    "(apt-get install -y chromium; .ci/run installs it)",
)


def chromium(tmp_path: Path, *args: str, timeout: float = 120.0) -> str:
    """Run Chromium once in its own process group with a fresh profile; its stdout."""
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    process = subprocess.Popen(
        [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        env={**os.environ, "HOME": str(tmp_path)},
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"chromium did not finish within {timeout:.0f} s")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0, err[-2000:]
    return out


@pytest.fixture(scope="module")
def report_html(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("fuzz-report")
    return write_report(directory, "fuzz", rp.fuzz_payload()).html


def test_screenshot_is_not_blank_and_shows_the_cliff_curve(report_html, tmp_path):
    from matplotlib.image import imread

    shot = tmp_path / "report.png"
    chromium(tmp_path, "--window-size=1200,1400", f"--screenshot={shot}", report_html.as_uri())
    pixels = imread(shot)[..., :3]
    assert pixels.shape[:2] == (1400, 1200)
    assert float(pixels.std()) > 0.05, "the screenshot is blank"
    colors = (pixels * 255).round().astype(int)
    distinct = {tuple(c) for c in colors[::7, ::7].reshape(-1, 3)}
    assert len(distinct) > 20
    # the target's output curve is drawn in #1565c0, the header bar in #263238
    curve = np.all(np.abs(colors - np.array([0x15, 0x65, 0xC0])) <= 12, axis=-1)
    header = np.all(np.abs(colors - np.array([0x26, 0x32, 0x38])) <= 6, axis=-1)
    assert curve.sum() > 300, "the cliff sweep's output curve is not on screen"
    assert header[:40].mean() > 0.5


def test_dom_contains_the_cliff_plot(report_html, tmp_path):
    dom = chromium(tmp_path, "--dump-dom", report_html.as_uri())
    assert '<figure id="cliff-sweep-0" class="plot cliff-sweep">' in dom
    assert 'id="cliff-sweep-0-svg"' in dom
    assert "cliff between adjacent fp16 values 7.621094 | 7.625" in dom
    assert "predicted log(65504/32) = 7.6241" in dom

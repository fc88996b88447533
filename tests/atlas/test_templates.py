"""An atlas sweep's long-lived processes stay bounded whatever its sources' build times:
every sample's factory sleeps past the hold threshold (as every build does on a loaded
machine), and the sweep still keeps at most the roster's limit of templates alive,
counted as this process's children while it runs, with their resident memory under a
bound."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from nebisect.atlas.samples import OpSample
from nebisect.atlas.sweep import SweepSettings, sweep
from nebisect.executors.runner import Runner
from nebisect.isolation import fork
from nebisect.sources.torch import HOLD_FROM_SECONDS

#: the bound the sweep runs under: the process's roster is held to it, lower than
#: MAX_TEMPLATES because each sample starts a template of its own (seconds of imports),
#: which is what limits the count a test can afford
BOUND = 2
#: twice the bound: a sweep that kept a template per slow source would pass it twice over
SAMPLES = 2 * BOUND
#: what each sample's factory sleeps: every build is "slow", so every source asks to
#: be held in a template of its own
BUILD_SLEEP = 4 * HOLD_FROM_SECONDS
#: the most one template may hold: torch and coremltools imported (~350 MB), one
#: one-op source built
TEMPLATE_MB = 700
TEMPLATE_MODULE = b"nebisect.isolation.template"
PAGE = os.sysconf("SC_PAGE_SIZE")


class SlowSample(OpSample):
    """A sample whose source's factory sleeps before it builds."""

    def source_text(self) -> str:
        return ("import time\n" + super().source_text()).replace(
            "def model():\n", f"def model():\n    time.sleep({BUILD_SLEEP})\n")


def tanh_samples(count: int) -> list[OpSample]:
    return [SlowSample("tanh", "", f"float32:{n}", "torch.tanh(x0)",
                       {"x0": np.linspace(-n, n, 4, dtype=np.float32)})
            for n in range(1, count + 1)]


@dataclass
class Census:
    """The most templates, and the most resident memory (MiB) of them, seen at once
    among this process's children (the sweep's other children, a conversion or a
    persistent worker, come and go with their job)."""

    templates: int = 0
    resident_mb: float = 0.0


def children() -> Iterator[tuple[bytes, int]]:
    """(command line, resident bytes) of each live child of this process."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) != me or fields[0] == "Z":
                continue
            resident = int((entry / "statm").read_text().split()[1]) * PAGE
            yield (entry / "cmdline").read_bytes(), resident
        except (OSError, IndexError, ValueError):
            continue


@pytest.fixture
def census() -> Iterator[Census]:
    seen = Census()
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.02):
            found = list(children())
            templates = [resident for line, resident in found if TEMPLATE_MODULE in line]
            seen.templates = max(seen.templates, len(templates))
            seen.resident_mb = max(seen.resident_mb, sum(templates) / 2**20)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    yield seen
    stop.set()
    watcher.join()


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_sweep_of_slow_builds_keeps_its_templates_bounded(
        census: Census, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fork.ROSTER, "limit", BOUND)
    with Runner(1) as runner:
        atlas = sweep(tanh_samples(SAMPLES), SweepSettings(budget=1), runner)
    assert [e.skipped for e in atlas.entries] == [""] * SAMPLES
    assert all(e.cells["export"]["converts"] == "ok" for e in atlas.entries)
    assert census.templates == BOUND
    assert census.resident_mb <= BOUND * TEMPLATE_MB
    assert not any(TEMPLATE_MODULE in line for line, _ in children())

"""Hostile runs against a Dask cluster: a ``replay --cluster`` stopped by SIGTERM while
its cases sleep on the workers must cancel them there — no case process, no helper left
on any worker, the workers themselves untouched — and leave nothing behind here."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import SUPPORT
from support.cluster_support import descendants, reset, slow_target_cluster, worker_pids
from support.corpus_helpers import add, filled, lse_package
from support.leftovers import Sandbox

from nebisect.case import CaseOptions
from nebisect.corpus import Corpus, Expected

pytestmark = pytest.mark.cluster

SLOW_PLUGIN = SUPPORT / "plugins_slow.py"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, Path]]:
    with slow_target_cluster(tmp_path_factory.mktemp("dask")) as running:
        yield running


def test_sigterm_cancels_the_units_on_the_workers_and_leaves_nothing(
        cluster: tuple[Any, Any, Path], tmp_path: Path) -> None:
    local, client, signals = cluster
    reset(signals)
    corpus = Corpus(tmp_path / "corpus", create=True)
    package = lse_package(tmp_path / "lse.mlpackage")
    for value in (1.0, 2.0):
        add(corpus, package, filled("x", (1, 32), value), Expected("pass"), target="sim:slow",
            options=CaseOptions(plugins=(str(SLOW_PLUGIN),)))
    pids = worker_pids(client)
    sandbox = Sandbox(tmp_path / "sandbox")
    process = sandbox.start("replay", str(corpus.root), "--cluster", local.scheduler_address)
    calls = signals / "calls"
    deadline = time.monotonic() + 120
    while (not calls.exists() or calls.stat().st_size < 2) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert calls.stat().st_size == 2, "both cases should be sleeping on the workers"
    code, _, err = sandbox.terminate_when(process, signals / "ready", sig=signal.SIGTERM)
    assert code == 143, err
    assert err.strip().splitlines()[-1] == (
        "nebisect: interrupted by SIGTERM; stopped and cleaned up")
    assert sandbox.leftovers() == []
    assert not _settled_descendants(pids)
    assert worker_pids(client) == pids


def _settled_descendants(pids: dict[str, int]) -> list[Any]:
    """What is still below the workers once the cancellation had a moment to act."""
    deadline = time.monotonic() + 10
    while (found := descendants(pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found

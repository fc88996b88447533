"""Hostile runs against a Dask cluster: a ``replay --cluster`` stopped by SIGTERM while
its cases sleep on the workers must cancel them there — no case process, no helper left
on any worker, the workers themselves untouched — and leave nothing behind here.

And hostile schedulers: a port that accepts and never answers, or answers with bytes that
are not Dask's protocol, or a scheduler that stops answering while the units run. Every
command that takes ``--cluster`` ends within a few timeouts with one line and exit 2 —
no traceback, no hang in Dask's ``Client.__del__``, nothing left behind.
"""

from __future__ import annotations

import contextlib
import select
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import REPO, SUPPORT
from support.cluster_support import descendants, reset, slow_target_cluster, worker_pids
from support.corpus_helpers import add, filled, lse_package
from support.leftovers import Sandbox

from nebisect.case import CaseOptions
from nebisect.corpus import Corpus, Expected
from nebisect.executors import worker

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


#: What a fake scheduler sends once it accepted a connection (None: nothing, ever), and
#: how the one line that reports it begins after "cannot reach the Dask scheduler at …: ".
HOSTILE = {
    "never-answers": (None, "no answer from a Dask scheduler within 3 s"),
    # A frame length of 2**64 - 1: Dask tries to allocate exabytes for it.
    "garbage": (b"\xff" * 64, "its answer is not Dask's protocol ("),
    # 16 bytes of frames whose header claims 3 frame lengths (24 bytes): struct.error.
    "bad-header": (struct.pack("<QQQ", 16, 3, 1),
                   "its answer is not Dask's protocol (struct.error: "),
}
TIMEOUT = 3
#: generous for a loaded CI machine, far below forever (what a hang was)
PATIENCE = 3 * TIMEOUT + 10


@contextlib.contextmanager
def fake_scheduler(answer: bytes | None) -> Iterator[str]:
    """A TCP server on 127.0.0.1 that accepts every connection, sends ``answer`` and
    then nothing, keeping the connection open until the test ends. Yields its address."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.1)
    stop = threading.Event()
    accepted: list[socket.socket] = []

    def serve() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except TimeoutError:
                continue
            accepted.append(connection)
            if answer is not None:
                with contextlib.suppress(OSError):
                    connection.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join()
        for connection in [*accepted, server]:
            connection.close()


def against(address: str, sandbox: Sandbox, *command: str) -> tuple[int, str, float]:
    """Run ``nebisect COMMAND --cluster ADDRESS`` with a 3 s cluster timeout: its exit
    code, stderr and wall time. One that has not ended after a minute hangs: it fails."""
    started = time.monotonic()
    try:
        result = sandbox.run(*command, "--cluster", address, cwd=REPO, timeout=60,
                             NEBISECT_CLUSTER_TIMEOUT=str(TIMEOUT))
    except subprocess.TimeoutExpired:
        pytest.fail(f"nebisect {' '.join(command)} still waits on {address} after 60 s")
    return result.returncode, result.stderr, time.monotonic() - started


@pytest.mark.parametrize(("answer", "reason"), HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_scheduler_is_one_line_exit_2_within_the_timeout(
        answer: bytes | None, reason: str, tmp_path: Path) -> None:
    sandbox = Sandbox(tmp_path / "sandbox")
    with fake_scheduler(answer) as address:
        code, err, took = against(address, sandbox, "replay", "corpus")
    assert code == 2, err
    assert err.startswith(
        f"nebisect: error: cannot reach the Dask scheduler at {address}: {reason}"), err
    assert len(err.strip().splitlines()) == 1, err
    assert took < PATIENCE, f"took {took:.1f} s"
    assert sandbox.leftovers() == []


@pytest.mark.parametrize("command", [
    ("run", "examples/logsumexp_ne.py:model"),
    ("fuzz", "--op", "all", "--seed", "0", "--jobs", "2"),
    ("fix", "verify", "corpus"),
    ("replay", "corpus", "--devices", "family=m1"),
], ids=["run", "fuzz", "fix-verify", "replay-devices"])
def test_every_cluster_command_gives_up_on_a_silent_scheduler(
        command: tuple[str, ...], tmp_path: Path) -> None:
    sandbox = Sandbox(tmp_path / "sandbox")
    with fake_scheduler(None) as address:
        code, err, took = against(address, sandbox, *command)
    assert code == 2, err
    assert err == (f"nebisect: error: cannot reach the Dask scheduler at {address}: "
                   f"no answer from a Dask scheduler within {TIMEOUT} s\n")
    assert took < PATIENCE, f"took {took:.1f} s"
    assert sandbox.leftovers() == []


@contextlib.contextmanager
def freezable_proxy(target: str) -> Iterator[tuple[str, threading.Event]]:
    """A TCP proxy to ``target`` that stops passing bytes either way (connections stay
    open) once the yielded event is set: a scheduler that stopped answering."""
    host, port = target.removeprefix("tcp://").rsplit(":", 1)
    server = socket.create_server(("127.0.0.1", 0))
    frozen, stop = threading.Event(), threading.Event()
    threads: list[threading.Thread] = []
    opened: list[socket.socket] = [server]

    def pump(source: socket.socket, sink: socket.socket) -> None:
        while not stop.is_set():
            if frozen.is_set() or not select.select([source], [], [], 0.1)[0]:
                time.sleep(0.01)
                continue
            try:
                data = source.recv(1 << 16)
                if not data:
                    break
                sink.sendall(data)
            except OSError:
                break
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def accept() -> None:
        while not stop.is_set():
            if not select.select([server], [], [], 0.1)[0]:
                continue
            client, _ = server.accept()
            upstream = socket.create_connection((host, int(port)))
            opened.extend((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                thread = threading.Thread(target=pump, args=(source, sink), daemon=True)
                thread.start()
                threads.append(thread)

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"tcp://127.0.0.1:{server.getsockname()[1]}", frozen
    finally:
        stop.set()
        for thread in [acceptor, *threads]:
            thread.join()
        for end in opened:
            end.close()


def test_a_scheduler_that_stops_answering_mid_run_is_one_line_exit_2(
        cluster: tuple[Any, Any, Path], tmp_path: Path) -> None:
    """The cases sleep on the workers (for an hour) when the scheduler goes silent: the
    run ends within a few timeouts instead of waiting for them, or for it, forever."""
    local, client, signals = cluster
    reset(signals)
    corpus = Corpus(tmp_path / "corpus", create=True)
    add(corpus, lse_package(tmp_path / "lse.mlpackage"), filled("x", (1, 32), 1.0),
        Expected("pass"), target="sim:slow", options=CaseOptions(plugins=(str(SLOW_PLUGIN),)))
    pids = worker_pids(client)
    sandbox = Sandbox(tmp_path / "sandbox")
    runs: set[str] = set()
    with freezable_proxy(local.scheduler_address) as (address, frozen):
        process = sandbox.start("replay", str(corpus.root), "--cluster", address,
                                NEBISECT_CLUSTER_TIMEOUT=str(TIMEOUT))
        try:
            deadline = time.monotonic() + 120
            while not (signals / "ready").exists() and time.monotonic() < deadline:
                assert process.poll() is None, process.communicate()
                time.sleep(0.05)
            runs = {key.split("-")[1] for keys in client.processing().values()
                    for key in keys if key.startswith("nebisect-")}
            frozen.set()
            started = time.monotonic()
            try:
                _, err = process.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                pytest.fail("replay still waits on a silent scheduler after 60 s")
            took = time.monotonic() - started
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
            for run in runs:  # the cases nobody could cancel through the silent scheduler
                client.run(worker.cancel_run, run)
                client.run(worker.end_run, run)
    assert process.returncode == 2, err
    assert err == (f"nebisect: error: the Dask scheduler at {address} did not answer "
                   f"within {TIMEOUT} s (still there?)\n")
    assert took < PATIENCE, f"took {took:.1f} s"
    assert runs and sandbox.leftovers() == []
    assert not _settled_descendants(pids)

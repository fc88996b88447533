"""The executor seam over a real Dask ``LocalCluster`` (2 worker processes, started once).

Replay, fuzz and their faults through the cluster: the same verdicts and findings as
locally, a worker SIGKILLed mid-unit (the unit retried once elsewhere, both attempts
reported), a segfault on a worker (a verdict, the worker stays up), a scheduler that is
not there (one line, exit 2), a timeout or address that is not one (one line), models
shipped once per worker.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import REPO, SUPPORT
from support.cluster_support import (
    descendants,
    distributed,
    reset,
    scratch_space,
    slow_target_cluster,
    wait_for,
    worker_pids,
)
from support.corpus_helpers import add, filled, lse_package

import nebisect
from nebisect.arrays import save_npz
from nebisect.case import CaseOptions
from nebisect.corpus import Corpus, Expected
from nebisect.errors import NebisectError
from nebisect.executors.cluster import ClusterExecutor
from nebisect.executors.devices import FACT_KEYS, PRELOAD, group_devices, resource_name
from nebisect.executors.runner import Runner
from nebisect.guard.replay import ReplayResult, replay
from nebisect.isolate import fresh_mode

pytestmark = pytest.mark.cluster

NEBISECT = [sys.executable, "-m", "nebisect"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Any, Path]]:
    with slow_target_cluster(tmp_path_factory.mktemp("dask")) as running:
        yield running


def cli(*args: str, timeout: float = 900, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, **env}
    environment.pop("NEBISECT_CLUSTER", None)
    return subprocess.run([*NEBISECT, *args], capture_output=True, text=True, cwd=REPO,
                          timeout=timeout, env=environment)


def verdicts(output: str) -> list[tuple[str, str, str, str]]:
    return sorted((r["label"], r["outcome"], r["verdict"]["status"], r["verdict"]["signature"])
                  for r in json.loads(output)["results"])


def test_shipped_corpus_replays_through_the_cluster_as_it_does_locally(cluster: Any) -> None:
    local, client, _ = cluster
    here = cli("replay", "corpus", "--json")
    there = cli("replay", "corpus", "--json", "--cluster", local.scheduler_address)
    assert here.returncode == there.returncode == 0, there.stderr
    assert verdicts(there.stdout) == verdicts(here.stdout)
    assert len(verdicts(here.stdout)) == len(Corpus(REPO / "corpus").scan().cases) >= 14
    workers = {r["verdict"]["provenance"]["worker"] for r in json.loads(there.stdout)["results"]}
    assert workers <= set(worker_pids(client))


def test_fuzz_seed_0_jobs_4_finds_the_same_over_the_cluster(cluster: Any) -> None:
    local, _, _ = cluster
    args = ("fuzz", "--op", "softplus", "--target", "sim:ane", "--budget", "32", "--seed", "0",
            "--jobs", "4", "--isolation", fresh_mode(), "--json")
    here = cli(*args)
    there = cli(*args, "--cluster", local.scheduler_address)
    assert here.returncode == there.returncode == 1, there.stderr

    def findings(output: str) -> list[Any]:
        [result] = json.loads(output)["results"]
        return [(f["signature"], f["param_class"], f["case"], f["first_case"], f["hits"],
                 f["cliff"]) for f in result["findings"]]

    assert findings(here.stdout) and findings(there.stdout) == findings(here.stdout)


def test_fuzz_source_jobs_2_finds_the_same_over_the_cluster(cluster: Any) -> None:
    """A model campaign's shards go to the workers as ``fuzz-model`` units: each worker
    sets the session up from the shipped factory file and drives the shard a local
    thread would, so the merged findings are the same as here."""
    local, _, _ = cluster
    args = ("fuzz", f"{REPO}/examples/logsumexp_ne.py:model", "--target", "sim:ane",
            "--budget", "4", "--seed", "0", "--shrink-budget", "2", "--jobs", "2",
            "--isolation", fresh_mode(), "--json")
    here = cli(*args)
    there = cli(*args, "--cluster", local.scheduler_address)
    assert here.returncode == there.returncode == 1, there.stderr

    def findings(output: str) -> list[Any]:
        [result] = json.loads(output)["results"]
        return [(f["signature"], f["param_class"], f["case"], f["hits"], f["cliff"])
                for f in result["findings"]]

    assert findings(here.stdout) and findings(there.stdout) == findings(here.stdout)
    assert "export/const/x/base" in {f[1] for f in findings(there.stdout)}


def test_fix_verify_through_the_cluster_categorizes_as_locally(cluster: Any) -> None:
    local, _, _ = cluster
    args = ("fix", "verify", "corpus", "--target", "sim:ane", "--json")
    here = cli(*args)
    there = cli(*args, "--cluster", local.scheduler_address)
    assert here.returncode == there.returncode == 0, there.stderr

    def categories(output: str) -> list[tuple[str, str, str]]:
        return [(c["label"], c["category"], c["after"]["signature"] if c["after"] else "")
                for c in json.loads(output)["cases"]]

    assert categories(there.stdout) == categories(here.stdout)
    assert [c for _, c, _ in categories(here.stdout)].count("fixed") == 4


def slow_corpus(root: Path, target: str, plugin: str, values: tuple[float, ...]) -> Corpus:
    """Cases of the lse package on a test target whose plugin is stored with them."""
    corpus = Corpus(root / "corpus", create=True)
    package = lse_package(root / "lse.mlpackage")
    for value in values:
        add(corpus, package, filled("x", (1, 32), value), Expected("pass"), target=target,
            name=f"x={value}", options=CaseOptions(plugins=(str(SUPPORT / plugin),)))
    return corpus


def test_a_worker_killed_mid_unit_costs_a_retry_not_a_verdict(
        cluster: Any, tmp_path: Path) -> None:
    """The first prediction sleeps; its worker is SIGKILLed; Dask reschedules the unit,
    which runs to a verdict on another worker and lists the attempt that died."""
    local, client, signals = cluster
    reset(signals)
    corpus = slow_corpus(tmp_path, "sim:slow-once", "plugins_slow.py", (1.0, 2.0, 3.0))
    cases = corpus.scan().cases
    pids = worker_pids(client)
    executor = ClusterExecutor(local.scheduler_address)
    done: list[ReplayResult] = []
    thread = threading.Thread(target=lambda: done.extend(
        replay(cases, runner=Runner(executor=executor)).results))
    thread.start()
    wait_for(signals / "ready")
    case_pid = int((signals / "ready").read_text())
    [victim] = [a for a, pid in pids.items()
                if case_pid in {p.pid for p in descendants({a: pid})}]
    os.kill(pids[victim], signal.SIGKILL)
    thread.join(timeout=180)
    executor.close()
    assert not thread.is_alive()
    assert sorted(r.label for r in done) == ["x=1.0", "x=2.0", "x=3.0"]
    assert [r.outcome for r in done] == ["ok", "ok", "ok"]
    retried = [r for r in done if r.verdict.process.worker_attempts is not None]
    assert len(retried) == 1
    attempts = retried[0].verdict.process.worker_attempts
    assert [a["outcome"] for a in attempts] == ["lost", "done"]
    assert attempts[0]["worker"] == victim != attempts[1]["worker"]
    # The nanny restarts the victim under a new address: the tests after this one see
    # a whole cluster only once the victim is gone and its replacement has registered.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (
            victim in (present := workers_of(client)) or len(present) < len(pids)):
        time.sleep(0.2)
    assert victim not in workers_of(client) and len(workers_of(client)) == len(pids)


def test_a_segfault_on_a_worker_is_a_verdict_and_the_worker_stays_up(
        cluster: Any, tmp_path: Path) -> None:
    local, client, _ = cluster
    corpus = slow_corpus(tmp_path, "sim:segv-in-predict", "plugins_crash.py", (1.0,))
    before = worker_pids(client)
    with_cluster = ClusterExecutor(local.scheduler_address)
    try:
        [result] = replay(corpus.scan().cases, runner=Runner(executor=with_cluster)).results
    finally:
        with_cluster.close()
    assert result.verdict.signature == "crash:SIGSEGV"
    assert result.verdict.status == "crash" and result.outcome == "regression"
    assert result.verdict.process.worker_attempts is None
    assert worker_pids(client) == before


def test_models_are_shipped_once_per_worker(cluster: Any) -> None:
    local, _, _ = cluster
    cases = Corpus(REPO / "corpus").scan().cases[:4]
    executor = ClusterExecutor(local.scheduler_address)
    try:
        replay(cases, runner=Runner(executor=executor))
        replay(cases, runner=Runner(executor=executor))
        replay(cases, runner=Runner(executor=executor))
    finally:
        executor.close()
    assert executor.shipped and set(executor.shipped.values()) == {1}


def without_timings(report: dict[str, Any]) -> dict[str, Any]:
    """A run's JSON report without what differs between two runs of the same cells:
    timings, and the worker a verdict names when it ran on a cluster."""
    report.pop("timings")
    for row in report["rows"]:
        row["verdict"].pop("timings")
        row["verdict"]["provenance"].pop("worker", None)
    for verdict in report["conversions"].values():
        verdict.pop("timings")
        for attempt in verdict["metrics"]["attempts"]:
            attempt.pop("seconds")
    return report


@pytest.mark.slow
def test_run_through_the_cluster_finds_what_it_finds_locally(cluster: Any, tmp_path: Path
                                                             ) -> None:
    """The matrix cells and the attribution probes go to the workers; the matrix, the
    attributions and the groups are the local run's."""
    local, client, _ = cluster
    inputs = tmp_path / "x_7p7.npz"
    save_npz(inputs, {"x": np.full((1, 1, 8, 8), 7.7, np.float32)})
    args = ("run", "examples/logsumexp_ne.py:model", "--explore", "none", "--inputs",
            str(inputs), "--json")
    here = cli(*args)
    there = cli(*args, "--cluster", local.scheduler_address)
    assert here.returncode == there.returncode == 1, there.stderr
    remote = json.loads(there.stdout)
    ran_on = {r["verdict"]["provenance"]["worker"] for r in remote["rows"]}
    assert ran_on and ran_on <= set(worker_pids(client))
    assert without_timings(remote) == without_timings(json.loads(here.stdout))
    assert [(g["target"], g["path"], g["signature"], g["culprit"]["op_type"])
            for g in remote["groups"]] == [
        ("sim:ane", "export", "mismatch:collapse", "reduce_log_sum_exp"),
        ("sim:ane", "trace", "mismatch:collapse", "reduce_log_sum_exp")]
    assert len(remote["rows"]) == 8


@pytest.mark.slow
def test_the_atlas_through_the_cluster_judges_as_it_does_locally(cluster: Any) -> None:
    """Each sample's cells go to the workers; the entries are the local sweep's."""
    local, _, _ = cluster
    args = ("atlas", "--ops", "reciprocal", "--dtypes", "float32", "--json", "--no-cache",
            "--budget", "1")
    here = cli(*args)
    there = cli(*args, "--cluster", local.scheduler_address)
    assert here.returncode == there.returncode == 1, there.stderr

    def judged(output: str) -> list[tuple[Any, ...]]:
        return [(e["call"], e["cells"], e["findings"]) for e in json.loads(output)["entries"]]

    assert judged(there.stdout) == judged(here.stdout)
    (_, cells, findings) = judged(there.stdout)[0]
    assert cells["export"]["fp64"] == "mismatch:tolerance"
    assert [f["op_type"] for f in findings] == ["inverse"]


@pytest.mark.parametrize("command", [("replay", "corpus"),
                                     ("run", "examples/logsumexp_ne.py:model")])
def test_an_unreachable_scheduler_is_one_line_and_exit_2(command: tuple[str, str]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    result = cli(*command, "--cluster", f"tcp://127.0.0.1:{port}",
                 NEBISECT_CLUSTER_TIMEOUT="2")
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"nebisect: error: cannot reach the Dask scheduler at tcp://127.0.0.1:{port}: ")
    assert len(result.stderr.strip().splitlines()) == 1 and not result.stdout
    assert time.monotonic() - started < 60


def test_without_dask_cluster_is_one_line_not_an_import_error() -> None:
    code = ("import sys; sys.modules['distributed'] = None; "
            "sys.argv = ['nebisect', 'replay', 'corpus', '--cluster', 'tcp://127.0.0.1:1']; "
            "from nebisect.cli import main; main()")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=REPO, timeout=120)
    assert result.returncode == 2
    assert result.stderr.startswith("nebisect: error: --cluster: Dask is unavailable: "
                                    "install nebisect[cluster]")
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("value", ["abc", "0", "-1", "nan", "inf"])
def test_a_cluster_timeout_that_is_not_seconds_is_one_line(
        value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEBISECT_CLUSTER_TIMEOUT", value)
    with pytest.raises(NebisectError, match=r"^\$NEBISECT_CLUSTER_TIMEOUT must be a number "
                                            r"of seconds > 0, not "):
        ClusterExecutor("tcp://127.0.0.1:1")


@pytest.mark.parametrize("address", ["bogus://127.0.0.1:1", "tcp://127.0.0.1",
                                     "tcp://127.0.0.1:port"])
def test_an_address_dask_cannot_parse_is_refused_before_connecting(address: str) -> None:
    with pytest.raises(NebisectError, match=f"^--cluster '{address}' is not a Dask "
                                            "scheduler address: "):
        ClusterExecutor(address, timeout=1)


def workers_of(client: distributed.Client) -> dict[str, dict[str, Any]]:
    """The scheduler's worker records, fetched now (see ClusterExecutor.worker_records:
    ``client.scheduler_info`` can return a cache that lists no worker)."""
    return dict(client.sync(client.scheduler.identity, n_workers=-1)["workers"])


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """Workers that advertise different chip families as resources (an "M1" and an
    "M4", through the preload), and a third that says it is an "M4" but was started
    without the preload: it has no resources, so no device's unit may run there.
    Yields the scheduler's address and each worker's name → address."""
    scratch = tmp_path_factory.mktemp("fleet")

    def worker(family: str, preload: list[str]) -> dict[str, Any]:
        return {"cls": distributed.Nanny, "options": {
            "nthreads": 1, "local_directory": str(scratch), "preload": preload,
            "env": {"NEBISECT_WORKER_FACTS": json.dumps({"family": family})}}}

    workers = {"m1": worker("m1", [PRELOAD]), "m4": worker("m4", [PRELOAD]),
               "bare": worker("m4", [])}
    scheduler = {"cls": distributed.Scheduler, "options": {"dashboard_address": None}}
    with scratch_space(scratch), distributed.SpecCluster(
            workers=workers, scheduler=scheduler, silence_logs=50) as spec, \
            distributed.Client(spec, set_as_default=False) as client:
        names = {info["name"]: address for address, info in workers_of(client).items()}
        yield spec.scheduler_address, names


def test_the_preload_advertises_the_facts_as_resources(
        fleet: tuple[str, dict[str, str]]) -> None:
    address, _ = fleet
    with distributed.Client(address, set_as_default=False) as client:
        resources = {info["name"]: info["resources"] for info in workers_of(client).values()}
    assert resources["bare"] == {}
    assert resources["m4"]["family-m4"] == resources["m1"]["family-m1"] == 1.0
    assert "family-m1" not in resources["m4"] and len(resources["m4"]) == len(FACT_KEYS)
    assert resources["m1"][resource_name("nebisect", nebisect.__version__)] == 1.0


def test_devices_run_every_case_on_every_matching_worker_judged_per_chip(
        fleet: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    """The cliff case is recorded failing, but fixed on M4: on the "M4" (which still
    fails: it is the same simulator) that cell is a regression, on the "M1" it is ok.
    Every cell runs on its device's worker, never on the worker without resources."""
    address, names = fleet
    corpus = Corpus(tmp_path / "corpus", create=True)
    package = lse_package(tmp_path / "lse.mlpackage")
    add(corpus, package, filled("x", (1, 32), 7.7),
        Expected("failing", "mismatch:collapse", chips={"m4": "fixed"}), name="cliff")
    add(corpus, package, filled("x", (1, 32), 1.0), Expected("pass"), name="below")
    every = cli("replay", str(corpus.root), "--cluster", address, "--devices", "all", "--json")
    assert every.returncode == 1, every.stderr
    report = json.loads(every.stdout)
    assert [(d["label"], d["workers"]) for d in report["devices"]] == [
        ("m1", [names["m1"]]), ("m4", [names["m4"]])]
    cells = {(c["label"], c["device"]["label"]): (c["outcome"], c["expected"]["status"],
                                                  c["device"]["address"])
             for c in report["cells"]}
    assert cells == {
        ("cliff", "m1"): ("ok", "failing", names["m1"]),
        ("cliff", "m4"): ("regression", "fixed", names["m4"]),
        ("below", "m1"): ("ok", "pass", names["m1"]),
        ("below", "m4"): ("ok", "pass", names["m4"])}
    only_m1 = cli("replay", str(corpus.root), "--cluster", address, "--devices", "family=m1",
                  "--json")
    assert only_m1.returncode == 0, only_m1.stderr
    assert {(c["label"], c["device"]["label"], c["device"]["address"])
            for c in json.loads(only_m1.stdout)["cells"]} == {
        ("cliff", "m1", names["m1"]), ("below", "m1", names["m1"])}
    table = cli("replay", str(corpus.root), "--cluster", address, "--devices", "family=m1")
    assert table.returncode == 0, table.stderr
    assert "m1 (1 worker(s))" in table.stdout and "m4" not in table.stdout
    none = cli("replay", str(corpus.root), "--cluster", address, "--devices", "family=m9")
    assert none.returncode == 2
    assert none.stderr.strip() == ("nebisect: error: --devices 'family=m9' matches no worker "
                                   "(the cluster has: family=m1, family=m4)")


def test_devices_of_one_family_are_told_apart_by_the_facts_that_differ() -> None:
    devices = group_devices({
        "tcp://b": {"family": "m4", "os": "macOS 15.1", "coremltools": "8.1"},
        "tcp://a": {"family": "m4", "os": "macOS 15.1", "coremltools": "9.0"},
        "tcp://c": {"family": "m4", "os": "macOS 15.1", "coremltools": "9.0"},
        "tcp://d": {"family": "m1", "os": "macOS 14.6", "coremltools": "9.0"}})
    # in label order, whatever the addresses (ports) sort like
    assert [(d.label, d.workers) for d in devices] == [
        ("m1", ["tcp://d"]), ("m4 coremltools=8.1", ["tcp://b"]),
        ("m4 coremltools=9.0", ["tcp://a", "tcp://c"])]
    assert devices[0].resources == {"os-macos-14.6": 1.0, "family-m1": 1.0,
                                    "coremltools-9.0": 1.0}
    assert resource_name("chip", "Apple M4 Pro") == "chip-apple-m4-pro"


def test_devices_without_a_cluster_is_a_usage_error(tmp_path: Path) -> None:
    result = cli("replay", "corpus", "--devices", "all")
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "nebisect: error: --devices needs --cluster ADDRESS (or $NEBISECT_CLUSTER)")

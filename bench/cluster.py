"""Benchmark: corpus-replay throughput here (``--jobs 2``) vs over a 2-worker Dask cluster.

Builds the throw-away corpus of ``bench/replay.py`` (seed 000's 32-channel logsumexp at
N input values on ``sim:fp16``), then replays it in this process with the local
executor (2 threads of isolators) and with the cluster executor on a
``LocalCluster(n_workers=2, processes=True, threads_per_worker=1)`` on the same
machine — first cold (each worker asks for and receives every case's files once), then
warm (files cached on the workers). Same cores either way, so the ratio is the
cluster's overhead per case: a task round trip, the blob-cache check, the attempt
claim and the materialized copy of the case.

    .venv/bin/python bench/cluster.py [--cases 100]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

import dask
from distributed import LocalCluster
from replay import build_corpus

from nebisect.corpus import Corpus
from nebisect.executors.cluster import ClusterExecutor
from nebisect.executors.runner import Runner
from nebisect.guard.replay import replay


def timed(corpus: Corpus, runner: Runner) -> tuple[float, int]:
    cases = corpus.scan().cases
    started = time.perf_counter()
    summary = replay(cases, runner=runner)
    elapsed = time.perf_counter() - started
    if summary.count("ok") != len(cases):
        raise SystemExit(f"replay on {runner.executor.name}: "
                         f"{summary.count('ok')}/{len(cases)} ok")
    return elapsed, len(cases)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="nebisect-bench-cluster-"))
    try:
        corpus = build_corpus(tmp, args.cases)
        with Runner(2) as here:
            local, count = timed(corpus, here)
        with dask.config.set({"temporary-directory": str(tmp / "dask")}), LocalCluster(
                n_workers=2, processes=True, threads_per_worker=1,
                          dashboard_address=None, local_directory=str(tmp / "dask"),
                          silence_logs=50) as cluster:
            executor = ClusterExecutor(cluster.scheduler_address)
            try:
                cold, _ = timed(corpus, Runner(executor=executor))
                warm, _ = timed(corpus, Runner(executor=executor))
            finally:
                executor.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"replay of {count} cases on sim:fp16, 2 cores (in-process wall time)")
    for name, seconds in (("local --jobs 2", local), ("cluster, cold", cold),
                          ("cluster, warm", warm)):
        print(f"  {name:15s} {seconds:6.2f} s  {count / seconds:6.1f} cases/s  "
              f"{seconds / count * 1000:6.1f} ms/case  x{local / seconds:.2f} of local")
    print(f"  cluster overhead per case (warm): {(warm - local) / count * 1000:+.1f} ms")


if __name__ == "__main__":
    main()

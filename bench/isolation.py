"""Per-case overhead of the isolation modes versus a naive fresh interpreter per case.

Usage: ``python bench/isolation.py [--cases 200] [--spawn-cases 30] [--naive 3] [--arrays]``

Each isolated case runs a trivial numpy-only child (a tiny computation returning a
pass verdict; with ``--arrays`` also its 16-element array), so the time measured is the
isolation overhead: process creation, fd plumbing, the result round trip, clean-up.
Helpers are warmed up first (template and worker start-up is paid once per isolator,
not per case). The naive baseline is what a hand-written harness does: a fresh
``python -c "import coremltools"`` per case (coremltools imports torch: seconds).

Goals (issue 2): fork ≤ 5 ms median per case and ≥ 300× faster than the naive way.
Wall time depends on how busy the machine is (the load average is printed); the CPU
time per case, summed over every process involved, does much less.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Isolated children inherit this sys.path; with the repository root first, the child
# function is ``bench.isolation:trivial`` whichever directory the script runs from.
REPO = Path(__file__).resolve().parent.parent
sys.path[0] = str(REPO)

import argparse  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402

import numpy as np  # noqa: E402

from nebisect.isolate import Isolator, Job  # noqa: E402
from nebisect.verdict import Status, Verdict  # noqa: E402

GOAL_FORK_MS = 5.0
GOAL_RATIO = 300.0


@dataclass(frozen=True)
class TrivialArguments:
    """The child's arguments: how many values, and whether it returns them."""

    n: int
    arrays: bool


def trivial(payload: TrivialArguments) -> tuple[Verdict, dict[str, np.ndarray]]:
    """The child: numpy only, microseconds of work; with ``arrays``, returns its array."""
    values = np.arange(payload.n, dtype=np.float32)
    arrays = {"values": values} if payload.arrays else {}
    return Verdict(Status.PASS, job_result={"sum": float(values.sum())}), arrays


def _cpu_seconds() -> float:
    """CPU of this process plus every reaped descendant (templates, workers, cases)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


def session(mode: str, cases: int, arrays: bool) -> tuple[list[float], float]:
    """Wall ms of each case after a warm-up, and the whole session's CPU seconds.

    The CPU figure includes the helpers' start-up; :func:`isolated` subtracts a
    warm-up-only session to get CPU per case, which, unlike wall time, does not
    depend on how busy the shared machine is.
    """
    job = Job("bench.isolation:trivial", {"n": 16, "arrays": arrays})
    started_cpu = _cpu_seconds()
    samples = []
    with Isolator(mode) as isolator:
        for _ in range(3):
            assert isolator.run(job).verdict.status == "pass"
        for _ in range(cases):
            started = time.perf_counter()
            verdict = isolator.run(job).verdict
            samples.append((time.perf_counter() - started) * 1000)
            assert verdict.status == "pass", verdict.message
    return samples, _cpu_seconds() - started_cpu


def isolated(mode: str, cases: int, arrays: bool) -> tuple[list[float], float]:
    """Wall ms per case, and CPU ms per case over every process involved."""
    _, baseline = session(mode, 0, arrays)
    samples, total = session(mode, cases, arrays)
    return samples, (total - baseline) / cases * 1000


def naive_ms(repetitions: int) -> list[float]:
    samples = []
    for _ in range(repetitions):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import coremltools"], check=True,
                       capture_output=True)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200, help="cases for fork/persistent")
    parser.add_argument("--spawn-cases", type=int, default=30, help="cases for spawn")
    parser.add_argument("--naive", type=int, default=3, help="naive subprocess repetitions")
    parser.add_argument("--arrays", action="store_true",
                        help="the child also returns a small array (adds the .npz round trip)")
    args = parser.parse_args()

    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    medians: dict[str, float] = {}
    counts = {"fork": args.cases, "spawn": args.spawn_cases, "persistent": args.cases}
    for mode, count in counts.items():
        samples, cpu = isolated(mode, count, args.arrays)
        medians[mode] = statistics.median(samples)
        print(f"{mode:>11}: median {medians[mode]:9.2f} ms/case  "
              f"(p10 {np.percentile(samples, 10):.2f}, p90 {np.percentile(samples, 90):.2f}, "
              f"n={count}); CPU {cpu:.2f} ms/case, all processes")
    naive = statistics.median(naive_ms(args.naive))
    print(f"{'naive':>11}: median {naive:9.2f} ms/case  "
          f"(python -c 'import coremltools', n={args.naive})")
    print()
    for mode, median in medians.items():
        print(f"naive / {mode:<10} = {naive / median:8.1f}x")
    print(f"spawn / fork       = {medians['spawn'] / medians['fork']:8.1f}x")
    print()
    fork, ratio = medians["fork"], naive / medians["fork"]
    print(f"goal fork <= {GOAL_FORK_MS:g} ms: {'met' if fork <= GOAL_FORK_MS else 'MISSED'} "
          f"({fork:.2f} ms)")
    print(f"goal naive/fork >= {GOAL_RATIO:g}x: {'met' if ratio >= GOAL_RATIO else 'MISSED'} "
          f"({ratio:.0f}x)")


if __name__ == "__main__":
    main()

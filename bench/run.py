"""Where the wall time of ``nebisect run`` goes, and what the warm conversion template saves.

Usage: ``python bench/run.py [--conversions 2] [--jobs-baseline]``

1. The default ``nebisect run examples/logsumexp_ne.py:model`` (seed 000's model, the
   simulator targets, exploration on), timed from outside, beside the parts its
   ``--json`` summary adds up: conversion, predictions and, within them, the reference.
   With ``--jobs-baseline`` the same run with ``--jobs 1`` is timed too, as the ratio's
   baseline.
2. Conversion of that model (both paths, fp16) forked from the warm template against a
   fresh interpreter per conversion (spawn mode: what every conversion cost before,
   and what macOS still pays). The template's own start-up (imports plus one rehearsed
   conversion) is paid once per run and printed apart.

Goal (issue 12): warm conversion ≥ 3× faster than a fresh interpreter. Wall time
depends on how busy the machine is (the load average is printed); the ratios, measured
in the same process minutes apart, much less.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[0] = str(REPO)

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

from nebisect.isolate import Isolator  # noqa: E402
from nebisect.sources.convert import convert_paths  # noqa: E402
from nebisect.sources.resolve import Source  # noqa: E402

MODEL = "examples/logsumexp_ne.py:model"
GOAL_RATIO = 3.0


def timed_run(*extra: str) -> tuple[float, dict[str, Any]]:
    """Wall seconds of one ``nebisect run`` and its ``--json`` report."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "nebisect", "run", MODEL, "--json", *extra],
                          capture_output=True, text=True, cwd=REPO, check=False)
    wall = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"nebisect run failed ({done.returncode}): {done.stderr[-2000:]}")
    return wall, json.loads(done.stdout)


def conversions(mode: str, count: int) -> tuple[float, list[float]]:
    """Seconds of the first conversion (a template's start-up included) and of ``count``
    more, in one isolator of ``mode``."""
    source = Source("torch", str(REPO / MODEL))
    samples = []
    with tempfile.TemporaryDirectory(prefix="bench-run-") as tmp, Isolator(mode) as isolator:
        for k in range(count + 1):
            workdir = Path(tmp, str(k))
            workdir.mkdir()
            started = time.perf_counter()
            packages, verdict = convert_paths(source, "fp16", workdir, isolator)
            samples.append(time.perf_counter() - started)
            assert set(packages) == {"export", "trace"}, verdict.message
    return samples[0], samples[1:]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversions", type=int, default=2,
                        help="conversions timed per mode (after the first)")
    parser.add_argument("--jobs-baseline", action="store_true",
                        help="also time the run with --jobs 1")
    args = parser.parse_args()

    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    runs = {"default": timed_run()}
    if args.jobs_baseline:
        runs["--jobs 1"] = timed_run("--jobs", "1")
    print(f"\nnebisect run {MODEL}")
    print(f"{'':>10} {'wall s':>8} {'conversion s':>12} {'predictions s':>13} "
          f"{'reference s':>11}  explored")
    for name, (wall, report) in runs.items():
        t = report.get("timings", {})
        spent = sum(e["spent"] for e in report.get("explorations", {}).values())
        print(f"{name:>10} {wall:8.1f} {t.get('conversion', 0):12.1f} "
              f"{t.get('predictions', 0):13.1f} {t.get('reference', 0):11.1f}  "
              f"{spent} predictions")
    if args.jobs_baseline:
        print(f"--jobs 1 / default = {runs['--jobs 1'][0] / runs['default'][0]:.2f}x")

    start_warm, warm = conversions("fork", args.conversions)
    start_fresh, fresh = conversions("spawn", args.conversions)
    warm_s, fresh_s = statistics.median(warm), statistics.median(fresh)
    print(f"\nconversion of {MODEL} (fp16, export + trace), median of {args.conversions}")
    print(f"{'warm template':>16}: {warm_s:6.2f} s  (first, template start-up included: "
          f"{start_warm:.2f} s)")
    print(f"{'fresh process':>16}: {fresh_s:6.2f} s  (first: {start_fresh:.2f} s)")
    ratio = fresh_s / warm_s
    print(f"fresh / warm = {ratio:.2f}x")
    print(f"goal fresh/warm >= {GOAL_RATIO:g}x: {'met' if ratio >= GOAL_RATIO else 'MISSED'}")


if __name__ == "__main__":
    main()

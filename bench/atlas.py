"""What one atlas sample costs, and what the sweep's one warm runner saves.

Usage: ``python bench/atlas.py [--samples 6] [--budget 8]``

Judges the first ``--samples`` samples of a few elementwise ops (``exp``, ``tanh``,
``sigmoid``, ``sqrt``, ``nn.functional.silu``, ``reciprocal``) twice, with no cache:

1. **cold** — a fresh :class:`~nebisect.executors.runner.Runner` per sample (what
   calling ``nebisect run`` once per sample would pay: templates started, torch and
   coremltools imported, a conversion rehearsed, every time);
2. **warm** — one runner for all of them, as ``nebisect atlas`` sweeps (the first
   sample, which starts the templates, is not counted).

It prints samples/s and conversions/s (every conversion attempt: two paths at each
precision the targets need) for each, and warm / cold as the ratio. Wall time depends
on how busy the machine is (the load average is printed); the ratio, measured in the
same process minutes apart, much less.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[0] = str(REPO)

import argparse  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

from nebisect.atlas.plan import plan  # noqa: E402
from nebisect.atlas.samples import Sample  # noqa: E402
from nebisect.atlas.sweep import SweepSettings, judge  # noqa: E402
from nebisect.executors.runner import Runner  # noqa: E402

OPS = ["exp", "tanh", "sigmoid", "sqrt", "nn.functional.silu", "reciprocal"]


def conversions(seconds_and_counts: list[tuple[float, int]]) -> tuple[float, float]:
    """(samples/s, conversions/s) over the timed samples."""
    wall = sum(s for s, _ in seconds_and_counts)
    return len(seconds_and_counts) / wall, sum(c for _, c in seconds_and_counts) / wall


def timed(sample: Sample, settings: SweepSettings, runner: Runner,
          scratch: Path) -> tuple[float, int]:
    start = time.perf_counter()
    entry, _ = judge(sample, settings, runner, scratch)
    seconds = time.perf_counter() - start
    assert not entry.skipped, entry.skipped
    return seconds, entry.conversions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=6)
    parser.add_argument("--budget", type=int, default=8)
    args = parser.parse_args()
    samples = plan(OPS, ["float32"]).samples[: args.samples + 1]
    settings = SweepSettings(budget=args.budget)
    print(f"load average {os.getloadavg()[0]:.1f}; {len(samples) - 1} samples timed, "
          f"budget {args.budget}")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        cold = []
        for number, sample in enumerate(samples[1:]):
            with Runner(os.cpu_count() or 1) as runner:
                here = root / f"cold-{number}"
                here.mkdir()
                cold.append(timed(sample, settings, runner, here))
        warm = []
        with Runner(os.cpu_count() or 1) as runner:
            here = root / "warm"
            here.mkdir()
            judge(samples[0], settings, runner, here)  # starts the templates
            for sample in samples[1:]:
                warm.append(timed(sample, settings, runner, here))
    (cold_rate, cold_conv), (warm_rate, warm_conv) = conversions(cold), conversions(warm)
    print(f"  cold (a runner per sample): {cold_rate:5.3f} samples/s, "
          f"{cold_conv:5.2f} conversions/s")
    print(f"  warm (one runner, atlas):   {warm_rate:5.3f} samples/s, "
          f"{warm_conv:5.2f} conversions/s")
    print(f"  warm / cold: {warm_rate / cold_rate:4.2f}×")


if __name__ == "__main__":
    main()

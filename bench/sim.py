"""Simulator speed on a real model: sim:fp32 / sim:fp16 vs eager torch fp32 (MiniLM).

all-MiniLM-L6-v2 + masked mean-pool at a static sequence length (default 128) is
converted once per precision (isolated, with nebisect's converter overrides), then each
engine runs the same inputs; the script prints median wall times and the ratios to
eager torch. Goals (issue 3): sim:fp32 ≤ 3×, sim:fp16 ≤ 6× torch eager.

    .venv/bin/python bench/sim.py [--length 128] [--repeats 10] [--threads 1]
                                  [--workdir DIR] [--profile]

Both engines get the same thread count (``--threads``, default 1: torch intra-op
threads and the BLAS pools numpy uses), so the ratio compares the engines rather than
how well each copes with a busy machine. ``--workdir`` keeps the converted packages
between runs; ``--profile`` adds a cProfile of one sim:fp16 run, top functions by own
time.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")

GOALS = {"sim:fp32": 3.0, "sim:fp16": 6.0}


def static_source(workdir: Path, length: int) -> str:
    """A factory file for MiniLM at ``length`` (the example's static factory is 128)."""
    path = workdir / f"minilm_static_{length}.py"
    path.write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'examples')!r})\n"
        "import minilm_meanpool\n\n"
        f"def model():\n    return {{'module': minilm_meanpool.Encoder(), "
        f"'example_inputs': minilm_meanpool._inputs({length})}}\n"
    )
    return f"{path}:model"


def median_seconds(fn: Callable[[], Any], repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    for variable in THREAD_VARIABLES:  # before numpy loads its BLAS
        os.environ[variable] = str(args.threads)
    sys.path.insert(0, str(ROOT))
    bench(args)


def bench(args: argparse.Namespace) -> None:
    import numpy as np
    import torch

    from nebisect.isolate import Isolator
    from nebisect.mil.interp import run_program
    from nebisect.mil.load import load_program
    from nebisect.sources.convert import OVERRIDES_SETUP, convert_isolated
    from nebisect.sources.inputs import generate
    from nebisect.sources.resolve import Source
    from nebisect.sources.torch_load import load_torch_source
    from nebisect.sources.torch_module import run_module, to_torch_inputs

    torch.set_num_threads(args.threads)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="nebisect-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    source = static_source(workdir, args.length)

    packages: dict[str, Any] = {}
    with Isolator() as isolator:
        for precision in ("fp32", "fp16"):
            package = workdir / f"converted-{precision}.mlpackage"
            if not package.is_dir():
                package, verdict = convert_isolated(Source("torch", source), precision, workdir,
                                                    isolator, setup=(OVERRIDES_SETUP,))
                if package is None:
                    raise SystemExit(f"conversion failed: {verdict.message}")
            packages[precision] = load_program(package)

    loaded = load_torch_source(source)
    inputs = generate(loaded.descriptions(), args.length)
    tensors = to_torch_inputs(loaded, inputs, torch.float32)
    engines: dict[str, Callable[[], Any]] = {
        "torch eager fp32": lambda: run_module(loaded.module, tensors),
        "sim:fp32": lambda: run_program(packages["fp32"], inputs, "fp32"),
        "sim:fp16": lambda: run_program(packages["fp16"], inputs, "fp16"),
    }
    reference = run_module(loaded.module, tensors)["output"].astype(np.float64).ravel()
    print(f"MiniLM-L6 + mean-pool, sequence {args.length}, median of {args.repeats} runs "
          f"(torch threads {torch.get_num_threads()})")
    base = median_seconds(engines["torch eager fp32"], args.repeats)
    print(f"  {'torch eager fp32':<17} {base * 1e3:8.1f} ms")
    for name in ("sim:fp32", "sim:fp16"):
        seconds = median_seconds(engines[name], args.repeats)
        out = np.asarray(engines[name]().outputs["output"], np.float64).ravel()
        cosine = out @ reference / (np.linalg.norm(out) * np.linalg.norm(reference))
        ratio = seconds / base
        verdict = "ok" if ratio <= GOALS[name] else "OVER GOAL"
        print(f"  {name:<17} {seconds * 1e3:8.1f} ms  {ratio:5.2f}× torch  "
              f"(goal ≤ {GOALS[name]:.0f}×: {verdict})  cosine {cosine:.7f}")
    if args.profile:
        profiler = cProfile.Profile()
        profiler.runcall(engines["sim:fp16"])
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()

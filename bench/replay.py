"""Benchmark: ``nebisect replay`` of 100 cases on ``sim:fp16`` with ``--jobs 2``.

Builds a throw-away corpus of 100 cases (seed 000's 32-channel logsumexp at 100 input
values, recorded as passing), then times the whole ``nebisect replay DIR --jobs 2``
command — interpreter start, corpus verification, isolation templates, 100 isolated
evaluations (target + fp64 reference each) — and the same with ``--jobs 1``.
Goal: ≤ 10 s for the parallel run on 2 cores.

    .venv/bin/python bench/replay.py [--cases 100]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from nebisect.corpus import Corpus, Expected, NewCase
from nebisect.mil.load import save_program
from nebisect.mil.quiet import import_coremltools

GOAL_SECONDS = 10.0


def build_corpus(root: Path, cases: int) -> Corpus:
    ct = import_coremltools()
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import types

    program = mb.program(input_specs=[mb.TensorSpec(shape=(1, 32), dtype=types.fp16)],
                         opset_version=ct.target.iOS17)(
        lambda x: mb.reduce_log_sum_exp(x=x, axes=[1], keep_dims=True))
    package = root / "lse.mlpackage"
    save_program(program, package)
    corpus = Corpus(root / "corpus", create=True)
    for value in np.linspace(0.5, 7.0, cases):
        corpus.add(NewCase("mlpackage", str(package), "sim:fp16",
                           {"x": np.full((1, 32), value, np.float32)}, Expected("pass")))
    return corpus


def timed_replay(corpus: Corpus, jobs: int) -> float:
    command = [str(Path(sys.executable).parent / "nebisect"), "replay", str(corpus.root),
               "--jobs", str(jobs)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"replay failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="nebisect-bench-replay-"))
    try:
        corpus = build_corpus(tmp, args.cases)
        count = len(corpus.scan().cases)
        parallel = timed_replay(corpus, 2)
        serial = timed_replay(corpus, 1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"replay of {count} cases on sim:fp16 (wall time of the whole command)")
    print(f"  --jobs 2: {parallel:6.2f} s  ({parallel / count * 1000:5.1f} ms/case)  "
          f"goal <= {GOAL_SECONDS:.0f} s: {'met' if parallel <= GOAL_SECONDS else 'NOT met'}")
    print(f"  --jobs 1: {serial:6.2f} s  ({serial / count * 1000:5.1f} ms/case)  "
          f"speed-up x{serial / parallel:.2f}")


if __name__ == "__main__":
    main()

"""Simulator speed on a real model: sim:fp32 / sim:fp16 vs eager torch fp32.

The model (``--model``) is all-MiniLM-L6-v2 + masked mean-pool (real weights), or
transformers' ``BertModel`` at its default config (BERT-base) or a small config of it,
random init, seeded, at a static sequence length (default 128). It is converted once
per precision (isolated, with nebisect's converter overrides), then each engine runs
the same inputs; the script prints median wall times and the ratios to eager torch.
Goals: sim:fp32 ≤ 1.5×, sim:fp16 ≤ 2× torch eager.

    .venv/bin/python bench/sim.py [--model minilm|bert-base|bert-small] [--length 128]
                                  [--repeats 10] [--threads 1] [--workdir DIR] [--profile]

Both engines get the same thread count (``--threads``, default 1: torch intra-op
threads and the simulator's own workers, which split its large products among them
while numpy's BLAS stays on one thread, as in an isolated job), so the ratio compares
the engines rather than how well each copes with a busy machine.
``--workdir`` keeps the converted packages between runs; ``--profile`` adds, per sim
engine, the seconds each op type takes (kernel and storage) and a cProfile of one run,
top functions by own time.
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
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")

GOALS = {"sim:fp32": 1.5, "sim:fp16": 2.0}

#: ``--model`` → the factory expression a generated source file calls
MODELS = {
    "minilm": "minilm_meanpool.Encoder()",
    "bert-base": "Bert(transformers.BertConfig())",
    "bert-small": "Bert(transformers.BertConfig(hidden_size=128, num_hidden_layers=2, "
                  "num_attention_heads=2, intermediate_size=512))",
}


def static_source(workdir: Path, name: str, length: int) -> str:
    """A factory file for model ``name`` at ``length`` (MiniLM's inputs for every model;
    a BERT returns its last hidden state, seeded random init)."""
    path = workdir / f"{name}_static_{length}.py"
    path.write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'examples')!r})\n"
        "import minilm_meanpool\nimport torch\nimport transformers\n\n"
        "class Bert(torch.nn.Module):\n"
        "    def __init__(self, config):\n"
        "        super().__init__()\n"
        "        torch.manual_seed(0)\n"
        "        self.bert = transformers.BertModel(config).eval()\n\n"
        "    def forward(self, input_ids, attention_mask):\n"
        "        return self.bert(input_ids=input_ids, attention_mask=attention_mask)[0]\n\n"
        f"def model():\n    return {{'module': {MODELS[name]}, "
        f"'example_inputs': minilm_meanpool._inputs({length})}}\n"
    )
    return f"{path}:model"


def median_seconds(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """Median wall and median CPU seconds of one call (after a warm-up call). On a busy
    machine the wall time measures the queue for the cores; with one thread per engine
    the CPU time is the engine's own cost."""
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="minilm")
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    for variable in THREAD_VARIABLES:  # before numpy loads its BLAS
        os.environ[variable] = str(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = "1"  # as in an isolated job: the sim splits products
    sys.path.insert(0, str(ROOT))
    from nebisect.isolation.osproc import reuse_freed_memory

    reuse_freed_memory()  # as a job's process does, for both engines
    bench(args)


def op_type_seconds(run: Callable[[], Any]) -> dict[str, float]:
    """CPU seconds per op type over one ``run``: each step's kernel and the storage of its
    results, timed around the interpreter's per-op call."""
    from nebisect.mil import interp

    seconds: dict[str, float] = {}
    original = interp._run_kernel

    def timed(step: Any, env: dict[str, Any]) -> None:
        started = time.process_time()
        original(step, env)
        seconds[step.op_type] = seconds.get(step.op_type, 0.0) + time.process_time() - started

    interp._run_kernel = timed  # type: ignore[assignment]
    try:
        run()
    finally:
        interp._run_kernel = original  # type: ignore[assignment]
    return seconds


def print_profile(name: str, run: Callable[[], Any]) -> None:
    seconds = op_type_seconds(run)
    total = sum(seconds.values())
    print(f"\n{name}: CPU per op type (kernel + storage), {total * 1e3:.1f} ms in ops")
    for op_type, spent in sorted(seconds.items(), key=lambda item: -item[1])[:12]:
        print(f"  {op_type:<22} {spent * 1e3:8.2f} ms  {spent / total:6.1%}")
    profiler = cProfile.Profile()
    profiler.runcall(run)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(12)


def print_products(program: Any, length: int, repeats: int) -> None:
    """The program's ``linear`` products alone, as numpy's BLAS (the simulator's) and
    torch's compute them: each weight of the program once, on ``length`` rows."""
    import numpy as np
    import torch

    main = program.functions["main"]
    weights = [np.asarray(op.weight.val, np.float32) for op in main.operations
               if op.op_type == "linear" and op.weight.val is not None]
    rows = {w.shape[1]: np.ones((length, w.shape[1]), np.float32) for w in weights}
    torch_weights = [torch.from_numpy(w) for w in weights]
    torch_rows = {k: torch.from_numpy(v) for k, v in rows.items()}
    numpy_s, _ = median_seconds(lambda: [np.matmul(rows[w.shape[1]], w.T) for w in weights],
                                repeats)
    torch_s, _ = median_seconds(
        lambda: [torch.nn.functional.linear(torch_rows[w.shape[1]], w) for w in torch_weights],
        repeats)
    print(f"\n{len(weights)} linear products alone: numpy (the simulator's BLAS) "
          f"{numpy_s * 1e3:.1f} ms, torch {torch_s * 1e3:.1f} ms: {numpy_s / torch_s:.2f}×")


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
    # without --workdir: a directory its finalizer removes when the script exits
    scratch = tempfile.TemporaryDirectory(prefix="nebisect-bench-")
    workdir = args.workdir or Path(scratch.name)
    workdir.mkdir(parents=True, exist_ok=True)
    source = static_source(workdir, args.model, args.length)

    packages: dict[str, Any] = {}
    with Isolator() as isolator:
        for precision in ("fp32", "fp16"):
            package = workdir / f"{args.model}-{args.length}-{precision}.mlpackage"
            if not package.is_dir():
                converted, verdict = convert_isolated(Source("torch", source), precision,
                                                      workdir, isolator,
                                                      setup=(OVERRIDES_SETUP,))
                if converted is None:
                    raise SystemExit(f"conversion failed: {verdict.message}")
                converted.rename(package)
            packages[precision] = load_program(package)

    loaded = load_torch_source(source)
    inputs = generate(loaded.descriptions(), args.length)
    tensors = to_torch_inputs(loaded, inputs, torch.float32)
    engines: dict[str, Callable[[], Any]] = {
        "torch eager fp32": lambda: run_module(loaded.module, tensors),
        "sim:fp32": lambda: run_program(packages["fp32"], inputs, "fp32"),
        "sim:fp16": lambda: run_program(packages["fp16"], inputs, "fp16"),
    }
    reference = next(iter(run_module(loaded.module, tensors).values()))
    reference = reference.astype(np.float64).ravel()
    print(f"{args.model}, sequence {args.length}, median of {args.repeats} runs "
          f"(threads {torch.get_num_threads()}, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())})")
    base, base_cpu = median_seconds(engines["torch eager fp32"], args.repeats)
    print(f"  {'torch eager fp32':<17} {base * 1e3:8.1f} ms wall {base_cpu * 1e3:8.1f} ms CPU")
    for name in ("sim:fp32", "sim:fp16"):
        seconds, cpu = median_seconds(engines[name], args.repeats)
        out = np.asarray(next(iter(engines[name]().outputs.values())), np.float64).ravel()
        cosine = out @ reference / (np.linalg.norm(out) * np.linalg.norm(reference))
        ratio = seconds / base
        against_goal = "ok" if ratio <= GOALS[name] else "OVER GOAL"
        print(f"  {name:<17} {seconds * 1e3:8.1f} ms wall {cpu * 1e3:8.1f} ms CPU  "
              f"{ratio:5.2f}× torch wall, {cpu / base_cpu:5.2f}× CPU  "
              f"(goal ≤ {GOALS[name]:.1f}×: {against_goal})  cosine {cosine:.7f}")
    if args.profile:
        print_products(packages["fp32"], args.length, args.repeats)
        for name in ("sim:fp32", "sim:fp16"):
            print_profile(name, engines[name])


if __name__ == "__main__":
    main()

"""sim:fp16 + sim:ane on one input set: predicted apart, then together (the Neural Engine
re-running only the ops its profile computes differently, :func:`nebisect.targets.sim.
predicting_together`), in CPU seconds of this one process.

    .venv/bin/python bench/sharing.py [SOURCE ...] [--sets 6] [--repeats 3] [--threads 1]
                                      [--workdir DIR]

Each torch source (default: ``examples/logsumexp_ne.py:model`` and the zoo's ViT) is
converted once at fp16 (isolated, with nebisect's converter overrides); a package is
taken as it is. Its generated input set and copies scaled ×2 … ×``--sets`` are
predicted on both targets, apart and together, and the outputs compared bit for bit.
Printed: median CPU seconds over ``--repeats`` of all the sets, the ratio, the ops of
the program, those whose plans differ, those re-run at worst and those re-run on the
first set; with the load average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
SOURCES = (f"{ROOT / 'examples' / 'logsumexp_ne.py'}:model", f"{ROOT / 'zoo' / 'vit.py'}:model")


def cpu_seconds(fn: Callable[[], Any], repeats: int) -> float:
    """Median CPU seconds of one call (after a warm-up call)."""
    fn()
    spent = []
    for _ in range(repeats):
        started = time.process_time()
        fn()
        spent.append(time.process_time() - started)
    return statistics.median(spent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", default=list(SOURCES))
    parser.add_argument("--sets", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    for variable in THREAD_VARIABLES:  # before numpy loads its BLAS
        os.environ[variable] = str(args.threads)
    sys.path.insert(0, str(ROOT))
    # without --workdir: a directory its finalizer removes when the script exits
    scratch = tempfile.TemporaryDirectory(prefix="nebisect-bench-")
    workdir = args.workdir or Path(scratch.name)
    workdir.mkdir(parents=True, exist_ok=True)
    for source in args.sources:
        bench(source, workdir, args.sets, args.repeats)


def convert(source: str, workdir: Path) -> Path:
    """``source`` converted at fp16 into ``workdir`` (kept between runs); a package is
    taken as it is."""
    if source.endswith(".mlpackage"):
        return Path(source)
    from nebisect.isolate import Isolator
    from nebisect.sources.convert import OVERRIDES_SETUP, convert_isolated
    from nebisect.sources.resolve import Source

    package = workdir / f"{Path(source.rpartition(':')[0]).stem}-fp16.mlpackage"
    if not package.is_dir():
        with Isolator() as isolator:
            converted, verdict = convert_isolated(Source("torch", source), "fp16", workdir,
                                                  isolator, setup=(OVERRIDES_SETUP,))
        if converted is None:
            raise SystemExit(f"conversion failed: {verdict.message}")
        converted.rename(package)
    return package


def bench(source: str, workdir: Path, sets: int, repeats: int) -> None:
    import numpy as np

    from nebisect.inputs.inputsets import base_input_sets
    from nebisect.mil import interp
    from nebisect.mil.plan import diff_plans, same_value
    from nebisect.sources.artifact import Artifact
    from nebisect.sources.resolve import resolve_source
    from nebisect.targets.registry import get_target
    from nebisect.targets.sim import predicting_together

    package = convert(source, workdir)
    resolved = resolve_source(str(package))
    generated = base_input_sets(resolved, (8,), example=False)[0].arrays
    inputs = [{name: value * scale if value.dtype.kind == "f" else value
               for name, value in generated.items()} for scale in range(1, sets + 1)]
    artifact = Artifact.of(resolved.ref)
    fp16, ane = get_target("sim:fp16"), get_target("sim:ane")

    def apart() -> list[Any]:
        return [(fp16.predict(artifact, x), ane.predict(artifact, x)) for x in inputs]

    def together() -> list[Any]:
        predicted = []
        for x in inputs:
            with predicting_together():
                predicted.append((fp16.predict(artifact, x), ane.predict(artifact, x)))
        return predicted

    for (a16, aane), (t16, tane) in zip(apart(), together(), strict=True):
        for first, second in ((a16, t16), (aane, tane)):
            assert all(same_value(np.asarray(v), np.asarray(second.outputs[k]))
                       for k, v in first.outputs.items()), "together differs from apart"
    before = cpu_seconds(apart, repeats)
    after = cpu_seconds(together, repeats)
    program = artifact.program
    plans = [interp.compile_program(program, "fp16", unit="gpu").plan,
             interp.compile_program(program, "fp16", profile="ane").plan]
    diff = diff_plans(*plans)
    ran: list[str] = []
    run_step = interp._run_step

    def counted(step: Any, env: dict[str, Any]) -> None:
        ran.append(step.name)
        run_step(step, env)

    with predicting_together():
        fp16.predict(artifact, inputs[0])
        interp._run_step = counted  # type: ignore[assignment]
        try:
            ane.predict(artifact, inputs[0])
        finally:
            interp._run_step = run_step  # type: ignore[assignment]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{source}: {len(inputs)} input sets, median of {repeats}, load average {load}")
    print(f"  apart    {before:8.3f} s CPU (sim:fp16 + sim:ane)")
    print(f"  together {after:8.3f} s CPU  ({after / before:.2f}× apart)")
    print(f"  ops {len(plans[1].main.steps)}, plans differ at {len(diff.differing)} "
          f"({', '.join(sorted(set(diff.differing.values())))}), re-run at worst "
          f"{len(diff.downstream(plans[1]))}, on the first set {len(ran)}; "
          f"entries held otherwise {len(diff.entries)}")


if __name__ == "__main__":
    main()

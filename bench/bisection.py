"""Evaluations and wall time of ``nebisect bisect`` on issue 5's acceptance cases.

    .venv/bin/python bench/bisect.py              # chains at 100 / 1 000 / 10 000 ops + MiniLM
    .venv/bin/python bench/bisect.py --chains     # the chains only (no torch, ~minutes)
    .venv/bin/python bench/bisect.py --sizes 1000 # one chain size

* **chain** — examples/lse_chain.py: N fp16 ops with one unshifted reduce_log_sum_exp in
  the middle that collapses on ``sim:ane``. "evaluations" counts every isolated run of
  the target (the original run that returns all intermediates, plus each isolated cut);
  "checks" the cheap comparisons of recorded intermediates of that one run. Polygraphy's
  ``debug reduce --mode=bisect`` needs 18 checks (each a full model run) at 1 000 nodes and
  27 at 10 000 (issue 5, measured there).
* **minilm predict** — all-MiniLM-L6-v2 + masked mean-pool, dynamic sequence, converted
  with ``--fix converter-compat``, failing on ``sim:ane`` (data-dependent shape).
* **minilm convert** — the same model's conversion failure with plain coremltools 9.0 +
  torch 2.13, reduced over the exported graph (submodules first, then nodes).

Wall time is that of the reduction (``bisect_source``: original run, search, writing the
output directory), not of building the chain's package; for MiniLM it includes the
conversion (predict case) and the export + recording of the torch graph (convert case).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

from nebisect.arrays import save_npz
from nebisect.executors.runner import Runner
from nebisect.minimize.bisector import BisectResult, bisect_source
from nebisect.minimize.options import BisectOptions
from nebisect.targets.spec import TargetSpec

ROOT = Path(__file__).resolve().parents[1]
POLYGRAPHY = {1000: 18, 10_000: 27}


def _chain_module():  # type: ignore[no-untyped-def]
    path = ROOT / "examples" / "lse_chain.py"
    spec = importlib.util.spec_from_file_location("lse_chain", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(case: str, result: BisectResult, seconds: float, extra: str = "") -> str:
    kept = ", ".join(result.kept_types)
    return (f"{case:16s} {result.units_before:>6} → {result.units_after:<5} "
            f"{result.evaluations:>5} {result.divergence_checks:>6} {seconds:>8.1f}  "
            f"{kept}{extra}")


def chains(sizes: list[int], runner: Runner, work: Path) -> None:
    from nebisect.mil.load import save_program

    lse_chain = _chain_module()
    for size in sizes:
        package = work / f"chain{size}.mlpackage"
        inputs = work / f"chain{size}.npz"
        save_program(lse_chain.chain_program(size), package)
        save_npz(inputs, lse_chain.chain_inputs())
        start = time.monotonic()
        options = BisectOptions(TargetSpec.parse("sim:ane"), inputs=str(inputs))
        result = bisect_source(str(package), options, work / f"out{size}", runner)
        seconds = time.monotonic() - start
        extra = ""
        if size in POLYGRAPHY:
            extra = (f"  (Polygraphy bisect: {POLYGRAPHY[size]} checks → "
                     f"{POLYGRAPHY[size] / result.evaluations:.1f}× more full runs)")
        print(_row(f"chain {size}", result, seconds, extra), flush=True)


def minilm(runner: Runner, work: Path) -> None:
    source = f"{ROOT / 'examples' / 'minilm_meanpool.py'}:model"
    cases = [
        ("minilm predict", BisectOptions(TargetSpec.parse("sim:ane"), fixes=("converter-compat",))),
        ("minilm convert", BisectOptions(TargetSpec.parse("sim:ane"), stage="convert")),
    ]
    for case, options in cases:
        start = time.monotonic()
        result = bisect_source(source, options, work / case.replace(" ", "-"), runner)
        print(_row(case, result, time.monotonic() - start), flush=True)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[100, 1000, 10_000])
    parser.add_argument("--chains", action="store_true", help="skip the MiniLM cases")
    args = parser.parse_args(argv)
    print(f"{'case':16s} {'units':>6} → {'kept':<5} {'evals':>5} {'checks':>6} {'wall s':>8}  "
          "kept op types")
    with tempfile.TemporaryDirectory(prefix="nebisect-bench-") as tmp, Runner(local=True) as runner:
        chains(args.sizes, runner, Path(tmp))
        if not args.chains:
            minilm(runner, Path(tmp))


if __name__ == "__main__":
    main(sys.argv[1:])

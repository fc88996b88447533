"""Throughput of isolated fuzz cases and the cost of cliff localization (issue 6).

    .venv/bin/python bench/fuzz.py                # everything (~minutes on 2 cores)
    .venv/bin/python bench/fuzz.py --cases 200    # more cases per throughput row

* **throughput** — small reductions (reduce_sum / reduce_max / reduce_mean, ≤ 64
  elements, uniform values) on ``sim:fp16`` through the fuzzer's executor: every case is
  a full isolated evaluation (build the one-op program, predict, run the fp64 oracle,
  judge). Rows: fork and persistent isolation with 1 and 2 workers (threads, one
  isolator each). Warm-up (template / worker start) is excluded; goals: fork ≥ 100
  cases/s, persistent ≥ 500 cases/s on 2 cores.
* **campaign** — a whole ``nebisect fuzz --op reduce_sum --target sim:fp16`` session
  (Hypothesis generation included): evaluations per second.
* **cliff** — seed 000's case (32 delta-replicated channels, reduce_log_sum_exp on
  ``sim:ane``) localized by bracketing and bisecting the fp16 grid: predictions used and
  bracket width, against the seed author's 2 000-point sweep of [−15, 15] (resolution
  0.015).
"""

from __future__ import annotations

import argparse
import math
import threading
import time
from typing import Any

from nebisect.executors.runner import Runner
from nebisect.fuzzing.campaign import Finding, localize_finding
from nebisect.fuzzing.execute import SubjectEvaluator
from nebisect.fuzzing.session import FuzzOptions, run_session
from nebisect.fuzzing.subject import OpSubject
from nebisect.isolate import Isolator
from nebisect.opspecs.ops import get_op
from nebisect.opspecs.strategies import delta

SWEEP_POINTS = 2000
OPS = ("reduce_sum", "reduce_max", "reduce_mean")
GOALS = {"fork": 100.0, "persistent": 500.0}


def small_cases(count: int) -> list[dict[str, Any]]:
    """``count`` distinct small reduction cases (shape, axes and seed vary)."""
    shapes = ([4, 8], [16], [2, 4, 8], [8, 8])
    cases = []
    for i in range(count):
        shape = shapes[i % len(shapes)]
        cases.append({
            "program": {"op": OPS[i % len(OPS)], "dtype": "fp16", "inputs": {"x": shape},
                        "params": {"axes": [-1], "keep_dims": bool(i % 2)}, "wrap": "none"},
            "values": {"x": {"kind": "uniform", "lo": -1.0, "hi": 1.0, "seed": i}},
        })
    return cases


def throughput(mode: str, workers: int, cases: list[dict[str, Any]]) -> float:
    """Isolated cases per second, warm (one warm-up case per worker not counted)."""
    shares = [cases[i::workers] for i in range(workers)]
    ready = threading.Barrier(workers + 1)
    done: list[float] = []

    def work(share: list[dict[str, Any]]) -> None:
        with Isolator(mode) as isolator:
            executor = SubjectEvaluator(OpSubject(get_op(OPS[0])), "sim:fp16", isolator)
            executor(share[0])
            ready.wait()
            for case in share[1:]:
                executor(case)
            executor.close()
        done.append(time.perf_counter())

    threads = [threading.Thread(target=work, args=(share,)) for share in shares]
    for thread in threads:
        thread.start()
    ready.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    return sum(len(s) - 1 for s in shares) / (max(done) - start)


def campaign_rate(budget: int) -> tuple[float, int]:
    with Isolator("persistent") as isolator:
        runner = Runner(isolator=isolator)
        run_session(["reduce_sum"], FuzzOptions(target="sim:fp16", budget=2), runner=runner)
        start = time.perf_counter()
        [result] = run_session(["reduce_sum"], FuzzOptions(target="sim:fp16", budget=budget),
                               runner=runner)
        return result.evaluations / (time.perf_counter() - start), result.evaluations


def cliff() -> Any:
    subject = OpSubject(get_op("reduce_log_sum_exp"))
    case = {"program": {"op": "reduce_log_sum_exp", "dtype": "fp16",
                        "inputs": {"x": [1, 32, 8, 8]},
                        "params": {"axes": [1], "keep_dims": True}, "wrap": "none"},
            "values": {"x": delta(8.0)}}
    finding = Finding(subject.name, subject.param_class(case), "mismatch:collapse",
                      "mismatch", "", case, case)
    with Isolator("persistent") as isolator:
        executor = SubjectEvaluator(subject, "sim:ane", isolator)
        try:
            return localize_finding(subject, executor, finding)
        finally:
            executor.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=120, help="cases per throughput row")
    parser.add_argument("--budget", type=int, default=100, help="campaign budget")
    args = parser.parse_args()
    cases = small_cases(args.cases)
    print("isolated cases/s on sim:fp16, small reductions (warm):")
    for mode in ("fork", "persistent"):
        for workers in (1, 2):
            rate = throughput(mode, workers, cases)
            goal = GOALS[mode]
            print(f"  {mode:<10} jobs={workers}  {rate:7.1f} cases/s   "
                  f"goal {goal:.0f}/s on 2 cores: {rate / goal:4.2f}×")
    rate, evaluations = campaign_rate(args.budget)
    print(f"campaign (persistent, reduce_sum, budget {args.budget}): {evaluations} evaluations, "
          f"{rate:.1f}/s")
    found = cliff()
    assert found is not None, "no cliff found on sim:ane"
    width = found.hi - found.lo
    print(f"cliff (reduce_log_sum_exp, 32 delta-replicated channels, sim:ane): "
          f"{found.lo} | {found.hi}, width {width:.4g} (1 fp16 ULP), predicted "
          f"log(65504/32) = {math.log(65504 / 32):.4f}")
    print(f"  predictions: {found.predictions} vs {SWEEP_POINTS} for the seed's sweep "
          f"({SWEEP_POINTS / found.predictions:.0f}× fewer), resolution {width:.4g} vs "
          f"{30 / SWEEP_POINTS:.3g} ({30 / SWEEP_POINTS / width:.1f}× finer)")


if __name__ == "__main__":
    main()

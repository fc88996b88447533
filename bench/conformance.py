"""Run coremltools' MIL op tests against the simulator and print the per-family table.

    .venv/bin/python bench/conformance.py                  # every family (hours on 2 cores)
    .venv/bin/python bench/conformance.py conv pool        # some families
    .venv/bin/python bench/conformance.py --sample 20      # 20 tests per test file
    .venv/bin/python bench/conformance.py --hash-sample 10 # a fixed 10 % of every family
    .venv/bin/python bench/conformance.py --report-only    # re-print from the logs
    .venv/bin/python bench/conformance.py --failed conv    # re-run logged failures only
    .venv/bin/python bench/conformance.py --audit conv     # what would excluded cases do?

Each family runs in its own pytest process (one core), appending verdicts to
``<out>/<family>.jsonl``; a family whose log exists is skipped unless ``--rerun``, so an
interrupted run resumes. The headline is passes over the cases that reached prediction
plus the excluded ones (an exclusion is a failure until the simulator matches); the
former figure, passes over reached cases only, is printed next to it. Excluded cases
are counted by kind and listed with their reasons (nebisect.mil.conformance.EXCLUSIONS);
failures are counted by cause (conformance_plugin.failure_cause).
"""

from __future__ import annotations

import os
import sys

# bench/ holds scripts, not modules: drop it from the import path so a sibling script
# named like a stdlib module (bench/bisect.py) cannot shadow it (random imports bisect).
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]

import argparse  # noqa: E402
import collections  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from nebisect.mil.conformance import (  # noqa: E402
    EXCLUSIONS,
    ConformanceRecord,
    FamilyRow,
    current_status,
    op_test_files,
    read_log,
    run_pytest,
    summarize,
    tests_root,
)
from nebisect.mil.conformance import excluded as exclusion  # noqa: E402


def _run(
    families: list[str] | None, out: Path, sample: int, rerun: bool, hash_sample: int
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for family, paths in op_test_files(families).items():
        log = out / f"{family}.jsonl"
        if log.exists() and not rerun:
            continue
        log.unlink(missing_ok=True)
        start = time.monotonic()
        code = run_pytest(paths, log, sample=sample, timeout=6 * 3600, hash_sample=hash_sample)
        print(f"{family:24s} pytest exit {code} in {time.monotonic() - start:7.1f}s", flush=True)


def _rerun(families: list[str] | None, out: Path, status: str) -> None:
    """Re-run only the logged cases of ``status`` (fail / not-reached) of each family;
    their new verdicts are appended (the log keeps a test's last verdict)."""
    for log in sorted(out.glob("*.jsonl")):
        if families is not None and log.stem not in families:
            continue
        chosen = [r.nodeid for r in read_log(log) if r.status == status]
        if chosen:
            code = run_pytest([str(tests_root() / n) for n in chosen], log, timeout=6 * 3600)
            print(f"{log.stem:24s} re-ran {len(chosen)} {status} cases, pytest exit {code}")


def _audit(families: list[str] | None, out: Path) -> None:
    """Run only the excluded tests and count what their verdicts would have been."""
    for family, paths in op_test_files(families).items():
        log = out / f"{family}.audit"
        log.unlink(missing_ok=True)
        run_pytest(paths, log, timeout=6 * 3600, extra=("--conformance-audit-exclusions",))
        if log.exists():
            verdicts = collections.Counter(r.detail.split(" ")[3] for r in read_log(log))
            print(f"{family:24s} excluded cases would be: {dict(verdicts)}", flush=True)


def _report(out: Path, families: list[str] | None, failures: int) -> FamilyRow:
    records: list[ConformanceRecord] = []
    for log in sorted(out.glob("*.jsonl")):
        if families is None or log.stem in families:
            records.extend(read_log(log))
    rows, total = summarize(records)
    print(f"\n{'family':24s} {'reached':>8s} {'pass':>6s} {'fail':>6s} {'excluded':>9s} "
          f"{'not reached':>12s} {'headline':>9s} {'of reached':>11s}")
    for row in [*rows, total]:
        print(f"{row.family:24s} {row.reached:8d} {row.passed:6d} {row.failed:6d} "
              f"{row.excluded:9d} {row.not_reached:12d} {100 * row.headline:8.2f}% "
              f"{100 * row.reached_rate:10.2f}%")
    print("\nheadline: passes / (reached + excluded); of reached: passes / reached (the "
          "former figure). sim:fp32 / sim:fp16 verdicts, Core ML runtime semantics.")
    excluded = [r for r in records if current_status(r) == "excluded"]
    print(f"\nexcluded cases by kind ({len(excluded)}):")
    kinds = collections.Counter(rule.kind for r in excluded if (rule := exclusion(r.nodeid)))
    for kind, count in kinds.most_common():
        print(f"  {count:5d}  {kind}")
        for rule in EXCLUSIONS:
            if rule.kind == kind:
                print(f"           {rule.pattern}: {rule.reason}")
    failed = [r for r in records if current_status(r) == "fail"]
    if failed and failures:
        print(f"\nfailures by cause ({len(failed)}):")
        for cause, count in collections.Counter(r.cause or "?" for r in failed).most_common():
            print(f"  {count:5d}  {cause}")
        print("top failures:")
        details = collections.Counter(f"{r.detail[:110]}  <- {r.cause}" for r in failed)
        for detail, count in details.most_common(failures):
            print(f"  {count:5d}  {detail[:200]}")
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", help="op families (default: all)")
    parser.add_argument(
        "--out", default=str(Path(tempfile.gettempdir()) / "nebisect-conformance"),
        help="log directory (kept between runs so an interrupted run resumes)",
    )
    parser.add_argument("--sample", type=int, default=0, help="tests per file (0: all)")
    parser.add_argument(
        "--hash-sample", type=int, default=100,
        help="keep the tests whose id hash falls in this percentage (default 100: all)",
    )
    parser.add_argument("--rerun", action="store_true", help="re-run families already logged")
    parser.add_argument("--report-only", action="store_true", help="only print the table")
    parser.add_argument("--failed", action="store_true", help="re-run only logged failures")
    parser.add_argument(
        "--unreached", action="store_true", help="re-run only cases logged as not reached"
    )
    parser.add_argument("--audit", action="store_true", help="run only excluded tests")
    parser.add_argument("--failures", type=int, default=15, help="failure causes to list")
    args = parser.parse_args()
    families = args.families or None
    out = Path(args.out)
    if args.audit:
        _audit(families, out)
        return 0
    if args.failed or args.unreached:
        _rerun(families, out, "fail" if args.failed else "not-reached")
    elif not args.report_only:
        _run(families, out, args.sample, args.rerun, args.hash_sample)
    total = _report(out, families, args.failures)
    print(f"\nconformance: {total.passed} / {total.reached + total.excluded} = "
          f"{100 * total.headline:.2f}% of reached + excluded cases "
          f"(former figure: {total.passed} / {total.reached} = {100 * total.reached_rate:.2f}% "
          "of reached cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Run coremltools' MIL op tests against the simulator and print the per-family table.

    .venv/bin/python bench/conformance.py                  # every family (hours on 2 cores)
    .venv/bin/python bench/conformance.py conv pool        # some families
    .venv/bin/python bench/conformance.py --sample 20      # 20 tests per test file
    .venv/bin/python bench/conformance.py --report-only    # re-print from the logs
    .venv/bin/python bench/conformance.py --failed conv    # re-run logged failures only
    .venv/bin/python bench/conformance.py --audit conv     # what would excluded cases do?

Each family runs in its own pytest process (one core), appending verdicts to
``<out>/<family>.jsonl``; a family whose log exists is skipped unless ``--rerun``, so an
interrupted run resumes. The rate is passes over the cases that reached prediction;
exclusions (nebisect.mil.conformance.EXCLUSIONS) are listed with their reasons.
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
    CaseRecord,
    current_status,
    op_test_files,
    read_log,
    run_pytest,
    summarize,
    tests_root,
)


def _run(families: list[str] | None, out: Path, sample: int, rerun: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for family, paths in op_test_files(families).items():
        log = out / f"{family}.jsonl"
        if log.exists() and not rerun:
            continue
        log.unlink(missing_ok=True)
        start = time.monotonic()
        code = run_pytest(paths, log, sample=sample, timeout=6 * 3600)
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


def _report(out: Path, families: list[str] | None, failures: int) -> float:
    records: list[CaseRecord] = []
    for log in sorted(out.glob("*.jsonl")):
        if families is None or log.stem in families:
            records.extend(read_log(log))
    rows, total = summarize(records)
    print(f"\n{'family':24s} {'reached':>8s} {'pass':>6s} {'fail':>6s} {'rate':>8s} "
          f"{'declared':>9s} {'excluded':>9s} {'not reached':>12s}")
    for row in [*rows, total]:
        print(f"{row.family:24s} {row.reached:8d} {row.passed:6d} {row.failed:6d} "
              f"{100 * row.rate:7.2f}% {100 * row.declared_rate:8.2f}% {row.excluded:9d} "
              f"{row.not_reached:12d}")
    print("\nrate: sim:fp32 / sim:fp16 verdicts; declared: counting failures that pass when "
          "the program's declared dtypes are honored (Core ML CPU storage)")
    print("\nexclusions:")
    for rule in EXCLUSIONS:
        print(f"  {rule.pattern}: {rule.reason}")
    causes = collections.Counter(
        f"[declared: {r.declared or '?'}] {r.detail}"
        for r in records
        if current_status(r) == "fail"
    )
    if causes and failures:
        print(f"\ntop failure causes ({sum(causes.values())} failing cases):")
        for detail, count in causes.most_common(failures):
            print(f"  {count:5d}  {detail[:160]}")
    return total.rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", help="op families (default: all)")
    parser.add_argument(
        "--out", default=str(Path(tempfile.gettempdir()) / "nebisect-conformance"),
        help="log directory (kept between runs so an interrupted run resumes)",
    )
    parser.add_argument("--sample", type=int, default=0, help="tests per file (0: all)")
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
        _run(families, out, args.sample, args.rerun)
    rate = _report(out, families, args.failures)
    print(f"\noverall conformance rate: {100 * rate:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())

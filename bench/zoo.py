"""The zoo's default ``nebisect run``: per model, the wall time and where it goes.

Usage: ``python bench/zoo.py [NAME ...] [--json OUT] [--extra ARGS]``

For each zoo model (all by default) the default ``nebisect run zoo/NAME.py:model
--json`` is timed from outside, beside the parts its summary adds up: conversion (both
paths, both precisions), reference (torch fp64, summed over cells) and simulation (the
rest of the cells' time, summed over both jobs' threads). The baseline, measured in the
same process, is the model's own eager forward in a fresh interpreter (import, factory,
one forward: what a user pays to run the model once); the ratio says how many of those
a whole default run costs. Goal (issue: ordinary models first): every zoo model ≤ 60 s
on an idle 2-core machine. The load average is printed: wall time depends on it.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[0] = str(REPO)

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

ZOO = REPO / "zoo"
FORWARD = """
import sys, time
sys.path.insert(0, {folder!r})
import torch
from {name} import model
made = model()
given = made["example_inputs"]
with torch.no_grad():
    made["module"].eval()(*(given.values() if isinstance(given, dict) else given))
"""


def timed(command: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    return time.perf_counter() - started, done


def measure(name: str, extra: list[str]) -> dict[str, Any]:
    """One model: the default run's wall time, parts, predictions and findings."""
    baseline, _ = timed([sys.executable, "-c", FORWARD.format(folder=str(ZOO), name=name)])
    wall, done = timed([sys.executable, "-m", "nebisect", "run", f"zoo/{name}.py:model",
                        "--json", *extra])
    row: dict[str, Any] = {"model": name, "exit": done.returncode, "wall": wall,
                           "baseline": baseline}
    if done.returncode not in (0, 1):
        row["error"] = done.stderr.strip().splitlines()[-1:] or ["(no message)"]
        return row
    report = json.loads(done.stdout)
    timings = report["timings"]
    row.update(
        predictions=sum(1 for r in report["rows"] if r["role"] == "target"),
        conversion=timings.get("conversion", 0.0), reference=timings.get("reference", 0.0),
        simulation=timings.get("predictions", 0.0) - timings.get("reference", 0.0),
        findings=[finding["title"] for finding in report["findings"]],
        far_findings=[finding["title"] for finding in report["far_findings"]],
        groups=[f"{g['target']} [{g['path'] or '-'}] {g['signature']} — {g['attribution']}"
                f" at {(g.get('culprit') or {}).get('op_type', '?')}; smallest "
                f"{g['smallest']['label']}" for g in report["groups"]],
        conversions={k: v["message"] for k, v in report["conversions"].items()},
        margins=[m["op_type"] + f" ×{m['factor']:.3g}" for m in report.get("margins", [])],
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="zoo models (default: all)")
    parser.add_argument("--json", type=Path, help="also write every row here")
    parser.add_argument("--extra", default="", help="extra arguments for run")
    args = parser.parse_args()
    names = args.names or sorted(p.stem for p in ZOO.glob("*.py") if not p.stem.startswith("_"))
    print(f"load average at start: {os.getloadavg()[0]:.1f}")
    print(f"{'model':<18}{'exit':>5}{'wall s':>8}{'× fwd':>7}{'preds':>7}{'conv s':>8}"
          f"{'ref s':>7}{'sim s':>7}  findings")
    rows = []
    for name in names:
        row = measure(name, args.extra.split())
        rows.append(row)
        print(f"{name:<18}{row['exit']:>5}{row['wall']:>8.1f}"
              f"{row['wall'] / max(row['baseline'], 1e-9):>7.1f}"
              f"{row.get('predictions', 0):>7}{row.get('conversion', 0):>8.1f}"
              f"{row.get('reference', 0):>7.1f}{row.get('simulation', 0):>7.1f}  "
              f"{len(row.get('findings', []))} {row.get('error', '')}", flush=True)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2))
    print(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()

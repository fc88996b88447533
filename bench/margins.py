"""What the realistic-input rule keeps and sets aside, source by source.

Runs ``nebisect run SOURCE --json`` with defaults on each source given (a torch factory
``file.py:model`` or a package) and prints, per source: the exit code, the findings,
and the findings set aside as margins (``far_findings``), each with its smallest
trigger and that trigger's ratio to the largest starting input. Exploration does not
depend on the rule, so one run shows both sides: discovery before the rule is
findings + margins, after it findings alone.

    .venv/bin/python bench/margins.py examples/published/*.py examples/found/*.py
    .venv/bin/python bench/margins.py /tmp/pkzoo/*.mlpackage
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


def _named(source: str) -> str:
    """A factory file as ``file.py:model``; anything else as given."""
    return f"{source}:model" if source.endswith(".py") else source


def _described(finding: dict[str, Any], scale: float) -> str:
    smallest = min((group["smallest"] for group in finding["groups"]),
                   key=lambda member: member["magnitude"])
    ratio = smallest["magnitude"] / scale if scale else float("nan")
    return (f"{finding['symptom']} at {finding['op_type'] or 'the model'} from "
            f"{smallest['label']} ({ratio:,.1f}× the starting inputs)")


def main(sources: list[str]) -> None:
    totals = {"findings": 0, "margins": 0, "failing": 0}
    for source in sources:
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "nebisect", "run", _named(source),
                               "--json"], capture_output=True, text=True, timeout=1800)
        wall = time.perf_counter() - started
        name = Path(source).name
        if done.returncode not in (0, 1):
            print(f"{name}: exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
            continue
        payload = json.loads(done.stdout)
        reports = payload.get("programs", [payload])
        findings = [f for report in reports for f in report["findings"]]
        margins = [f for report in reports for f in report.get("far_findings", [])]
        scale = reports[0].get("input_scale", 1.0)
        totals["findings"] += len(findings)
        totals["margins"] += len(margins)
        totals["failing"] += done.returncode == 1
        print(f"{name}: exit {done.returncode}, {wall:.0f} s, {len(findings)} finding(s), "
              f"{len(margins)} margin(s); starting inputs' largest |value| {scale:.3g}")
        for kind, listed in (("finding", findings), ("margin", margins)):
            for finding in listed:
                print(f"  {kind}: {_described(finding, scale)}")
    print(f"total over {len(sources)} sources: {totals['failing']} exit 1, "
          f"{totals['findings']} findings, {totals['margins']} margins (before the rule: "
          f"{totals['findings'] + totals['margins']} findings)")


if __name__ == "__main__":
    main(sys.argv[1:])

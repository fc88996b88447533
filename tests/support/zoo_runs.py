"""Running ``nebisect run`` with defaults on a zoo model, as a user would, and reading
what it says: the exit code, the JSON report and stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support import REPO

ZOO = REPO / "zoo"
#: every model of the zoo, by file stem
MODELS = sorted(p.stem for p in ZOO.glob("*.py") if not p.stem.startswith("_"))
#: what nebisect itself failing looks like: never acceptable on an ordinary model
INTERNAL = ("Traceback", "KeyError", "internal error", "reading the converted program failed")


#: a directory where each zoo run also leaves its summary (what docs/zoo.md is made of)
RESULTS_ENV = "NEBISECT_ZOO_RESULTS"


@dataclass
class ZooRun:
    """One default ``nebisect run zoo/NAME.py:model --json``."""

    code: int
    report: dict[str, Any]
    stderr: str
    wall: float = 0.0

    def summary(self, name: str) -> dict[str, Any]:
        """Wall time, predictions, the parts of the time, conversions, findings, margins."""
        report = self.report
        return {
            "model": name, "exit": self.code, "wall": round(self.wall, 1),
            "predictions": sum(1 for r in report.get("rows", []) if r["role"] == "target"),
            "timings": report.get("timings", {}),
            "conversions": {k: v["message"] for k, v in report.get("conversions", {}).items()},
            "findings": [{key: group.get(key) for key in ("target", "path", "signature",
                                                          "attribution", "message")}
                         | {"culprit": (group.get("culprit") or {}).get("op_type"),
                            "smallest": group["smallest"]["label"]}
                         for group in report.get("groups", [])],
            "margins": report.get("margins", []),
            "masked_outputs": report.get("masked_outputs", {}),
        }


def run_zoo(name: str, *extra: str, timeout: float = 1500) -> ZooRun:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "nebisect", "run", f"{ZOO / name}.py:model", "--json", *extra],
        capture_output=True, text=True, timeout=timeout, cwd=REPO,
        env={**os.environ, "NEBISECT_PROGRESS_INTERVAL": "30"})
    report = json.loads(done.stdout) if done.returncode in (0, 1) else {}
    run = ZooRun(done.returncode, report, done.stderr, time.perf_counter() - started)
    if os.environ.get(RESULTS_ENV):
        folder = Path(os.environ[RESULTS_ENV])
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.json").write_text(json.dumps(run.summary(name), indent=2))
    return run


def check_default_run(name: str) -> ZooRun:
    """``run`` with defaults on zoo model ``name``: no internal error, a report that
    agrees with its exit code, something judged, and torch able to compute its own model."""
    run = run_zoo(name)
    assert run.code in (0, 1), f"{name}: exit {run.code}: {run.stderr[-2000:]}"
    assert not any(text in run.stderr for text in INTERNAL), run.stderr[-2000:]
    report = run.report
    assert report["failed"] is (run.code == 1)
    assert bool(report["findings"]) is (run.code == 1)
    assert not report["reference_failed"], f"{name}: torch could not compute its own model"
    judged = [r for r in report["rows"] if r["role"] == "target"]
    assert judged and any(r["verdict"]["status"] != "skipped" for r in judged)
    return run

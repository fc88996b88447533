"""The default ``nebisect run`` on real-size models: time, memory and what it found.

Usage: ``python bench/realsize.py [--models NAME,…] [--small] [--json OUT] [--extra ARGS]``

Models (``bench/realsize_models.py``): ResNet-50 and ViT-B/16 at 224×224, BERT-base at
sequence 128 (SDPA attention), GPT-2 124 M at sequence 64 — transformers' own classes at
their default configs, random init, seeded, with declared input domains. ``--small``
runs the same classes at tiny configs (a quick check that the bench works).

Per model, ``nebisect run realsize_models.py:NAME --json`` (plus ``--extra``, e.g.
``--extra "--time-budget 2m"``) runs as a subprocess; the row gives its exit code, wall
time, the seconds its report's ``timings`` add up — conversion (every isolated
conversion), reference (torch fp64, within the cells) and simulation (the rest of the
cells), each summed over the run's threads, and search (the wall time of attribution
and exploration: culprit search, value families, guided probes, cliff localization,
their cells included) — the
predictions made (target rows, the explored ones included), the findings, and the peak
memory of the run's whole process tree, its templates and case children included
(``/proc/PID/smaps_rollup`` sampled every 0.2 s): ``peak_mb`` sums proportional set
sizes (a page shared by n processes counts 1/n in each, so the sum is the memory the
tree occupies), ``rss_sum_mb`` sums resident sizes (shared pages counted in every
process: an upper bound), ``largest_mb`` is the largest single process. ``--timeout``
stops a run (SIGTERM) and reads the report of what it finished (its ``interrupted``
says so). The load average is given at the start and
end of each run: wall time depends on it. Not a test (a real-size run takes minutes).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[0] = str(REPO)

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

FACTORIES = Path(__file__).resolve().parent / "realsize_models.py"
MODELS = ("resnet50", "vit_b16", "bert_base", "gpt2")
SAMPLE_SECONDS = 0.2
#: how long a run stopped by ``--timeout`` may take to write its report
STOP_GRACE = 60.0
MIB = 1 << 20


def tree_pids(root: int) -> set[int]:
    """``root`` and every live descendant (one pass over /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents[int(entry.name)] = int(fields[1])
    tree, frontier = {root}, [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in tree]
        tree.update(children)
        frontier.extend(children)
    return tree


def memory_of(pid: int) -> tuple[int, int]:
    """Resident and proportional bytes of one process (0, 0 once it has gone).

    The proportional set size divides each shared page among the processes that map it:
    a forked template's copy-on-write model weights and the torch libraries every child
    maps count once over the tree, where resident sizes count them in every process."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0, 0
    sizes = {}
    for line in text.splitlines()[1:]:
        key, _, rest = line.partition(":")
        if key in ("Rss", "Pss"):
            sizes[key] = int(rest.split()[0]) * 1024
    return sizes.get("Rss", 0), sizes.get("Pss", 0)


@dataclass
class Peaks:
    """The peaks a run's sampler saw, in bytes: the whole tree's proportional and
    resident sums, and the largest single process."""

    proportional: int = 0
    resident: int = 0
    largest: int = 0

    def sample(self, root: int) -> None:
        sizes = [memory_of(pid) for pid in tree_pids(root)]
        self.resident = max(self.resident, sum(rss for rss, _ in sizes))
        self.proportional = max(self.proportional, sum(pss for _, pss in sizes))
        self.largest = max([self.largest, *(rss for rss, _ in sizes)])


def run_sampled(command: list[str], timeout: float | None
                ) -> tuple[subprocess.CompletedProcess[str], Peaks]:
    """Run ``command``; its result and the memory peaks of its process tree.
    Past ``timeout`` seconds it gets SIGTERM (a stopped ``run`` still writes the report
    of what it finished), then SIGKILL if it has not ended :data:`STOP_GRACE` later."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, text=True, cwd=REPO)
        peaks = Peaks()
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(SAMPLE_SECONDS):
                peaks.sample(process.pid)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.terminate()
            try:
                code = process.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                process.kill()
                code = process.wait()
        stop.set()
        sampler.join()
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(command, code, out.read(), err.read())
    return done, peaks


def measure(name: str, extra: list[str], timeout: float | None) -> dict[str, Any]:
    """One model's default run: its row."""
    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    done, peaks = run_sampled([sys.executable, "-m", "nebisect", "run",
                               f"{FACTORIES}:{name}", "--json", *extra], timeout)
    row: dict[str, Any] = {"model": name, "exit": done.returncode,
                           "wall": round(time.perf_counter() - started, 1),
                           "peak_mb": round(peaks.proportional / MIB),
                           "rss_sum_mb": round(peaks.resident / MIB),
                           "largest_mb": round(peaks.largest / MIB),
                           "load_start": load_start, "load_end": os.getloadavg()[0]}
    try:
        report = json.loads(done.stdout)
    except ValueError:
        row["error"] = done.stderr.strip().splitlines()[-1:] or ["(no message)"]
        return row
    row["interrupted"] = report.get("interrupted", "")
    timings = report["timings"]
    conversion, cells = timings.get("conversion", 0.0), timings.get("predictions", 0.0)
    reference = timings.get("reference", 0.0)
    row.update(
        conversion=round(conversion, 1), reference=round(reference, 1),
        simulation=round(cells - reference, 1),
        search=round(timings.get("search", 0.0), 1),
        predictions=sum(1 for r in report["rows"] if r["role"] == "target"),
        findings=[finding["title"] for finding in report["findings"]],
    )
    return row


COLUMNS = ("model", "exit", "interrupted", "wall", "conversion", "reference", "simulation",
           "search", "predictions", "findings", "peak_mb", "rss_sum_mb", "largest_mb",
           "load_start", "load_end")


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table (findings counted; an error in its place)."""
    def cell(row: dict[str, Any], column: str) -> str:
        value = row.get(column, "")
        if column == "findings":
            return str(len(value)) if "error" not in row else f"error: {row['error'][0]}"
        return f"{value:.1f}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(cell(row, c) for c in COLUMNS) + " |" for row in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"comma-separated, of {', '.join(MODELS)} (default: all)")
    parser.add_argument("--small", action="store_true",
                        help="the same classes at tiny configs (a quick check)")
    parser.add_argument("--json", type=Path, help="also write every row here")
    parser.add_argument("--extra", default="", help="extra arguments for run")
    parser.add_argument("--timeout", type=float,
                        help="stop each run after this many seconds (its row: what it did)")
    args = parser.parse_args()
    names = [n for n in args.models.split(",") if n]
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        parser.error(f"--models: unknown {', '.join(unknown)} (one of {', '.join(MODELS)})")
    rows = []
    for name in names:
        rows.append(measure(f"{name}_small" if args.small else name, shlex.split(args.extra),
                            args.timeout))
        print(f"{name}: exit {rows[-1]['exit']} in {rows[-1]['wall']} s", file=sys.stderr,
              flush=True)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2))
    print(markdown(rows))


if __name__ == "__main__":
    main()

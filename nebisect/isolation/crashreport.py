"""The native evidence of a crash on macOS: the ``.ips`` report of the dead child.

When Core ML dies with SIGSEGV inside Espresso, the Python side sees only the signal;
the native stack (``Espresso::cast_kernel_cpu`` … in seed 003) is written by ReportCrash
to ``~/Library/Logs/DiagnosticReports/<process>-<date>.ips``, a second or so after the
death. An ``.ips`` file is one line of JSON (the header: ``app_name``, ``bug_type``,
``os_version`` …) followed by one JSON document (the body: ``pid``, ``exception``
``{type, signal, subtype}``, ``faultingThread``, ``threads[].frames[]`` with
``imageIndex``/``symbol``/``symbolLocation``, ``usedImages[].name``).

:func:`find_crash_report` matches the report by the child's pid among files written
since the case started, reads at most :data:`MAX_REPORT_BYTES` of each, and returns a
bounded summary — the exception and the faulting thread's top frames — to attach to the
verdict. Everything is a parameter (directory, pid, start time), so the matcher is
tested anywhere against a directory of files in the real format.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from nebisect.errors import NebisectError
from nebisect.files import open_regular, parse_untrusted_json

REPORTS_DIR = Path("~/Library/Logs/DiagnosticReports")
#: Reports larger than this are not read (a normal one is tens of kilobytes).
MAX_REPORT_BYTES = 4 << 20
#: Frames of the faulting thread kept in the summary.
MAX_FRAMES = 16
#: How long to wait for ReportCrash to write the report after the child died.
WAIT_SECONDS = 3.0


def find_crash_report(
    pid: int,
    since: float,
    directory: Path = REPORTS_DIR,
    wait: float = WAIT_SECONDS,
) -> dict[str, Any] | None:
    """The summary of the ``.ips`` report of process ``pid`` written after ``since``
    (epoch seconds), polling up to ``wait`` seconds for it to appear; None if none."""
    folder = directory.expanduser()
    deadline = time.monotonic() + wait
    while True:
        found = _scan(folder, pid, since)
        if found is not None or time.monotonic() >= deadline:
            return found
        time.sleep(0.2)


def _scan(folder: Path, pid: int, since: float) -> dict[str, Any] | None:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return None
    for entry in sorted(entries, key=lambda e: e.name, reverse=True):
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if (not entry.name.endswith(".ips") or not entry.is_file(follow_symlinks=False)
                or info.st_mtime < since or info.st_size > MAX_REPORT_BYTES):
            continue
        body = _body(Path(entry.path))
        if body is not None and body.get("pid") == pid:
            return summarize(Path(entry.path), body)
    return None


def _body(path: Path) -> dict[str, Any] | None:
    """The report's body document (the JSON after the header line, within the limits of
    :func:`~nebisect.files.parse_untrusted_json`), or None."""
    try:
        with open_regular(path, follow_symlinks=False) as handle:
            data = handle.read(MAX_REPORT_BYTES)
        _header, _, rest = data.partition(b"\n")
        body = parse_untrusted_json(rest.decode(), MAX_REPORT_BYTES)
    except (OSError, ValueError, NebisectError):
        return None
    return body if isinstance(body, dict) else None


def summarize(path: Path, body: dict[str, Any]) -> dict[str, Any]:
    """Report path, exception and the faulting thread's top frames (bounded)."""
    exception = _typed(body.get("exception"), dict)
    images = [str(_typed(i, dict).get("name", "?")) for i in _typed(body.get("usedImages"), list)]
    threads = [_typed(t, dict) for t in _typed(body.get("threads"), list)]
    faulting = body.get("faultingThread")
    thread = next((t for t in threads if t.get("triggered")), None)
    if thread is None:
        thread = (threads[faulting] if isinstance(faulting, int) and 0 <= faulting < len(threads)
                  else {})
    frames = [_frame(_typed(f, dict), images)
              for f in _typed(thread.get("frames"), list)[:MAX_FRAMES]]
    kind = " ".join(str(exception[k]) for k in ("type", "signal", "subtype") if exception.get(k))
    return {"path": str(path), "process": str(body.get("procName", ""))[:80],
            "exception": kind[:240], "frames": frames}


def _typed(value: Any, kind: type) -> Any:
    """``value`` if it is a ``kind`` (dict or list), else an empty one: a report is
    written by another program and any field may be missing or of another type."""
    return value if isinstance(value, kind) else kind()


def _frame(frame: dict[str, Any], images: list[str]) -> str:
    index = frame.get("imageIndex")
    image = images[index] if isinstance(index, int) and 0 <= index < len(images) else "?"
    symbol = frame.get("symbol")
    where = (f"{symbol}+{frame.get('symbolLocation', 0)}" if symbol
             else f"+{frame.get('imageOffset', 0)}")
    return f"{image[:60]}  {str(where)[:160]}"

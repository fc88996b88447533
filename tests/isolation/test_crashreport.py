"""The .ips matcher: a macOS crash report found by the dead child's pid (issue 14, item 11).

The directory is fake, the files are in the real format: one JSON header line, then the
JSON body with ``pid``, ``exception``, ``threads[].frames[]`` and ``usedImages``.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from nebisect.isolation.crashreport import MAX_FRAMES, MAX_REPORT_BYTES, find_crash_report

HEADER = {"app_name": "Python", "timestamp": "2025-08-20 10:00:00.00 +0200",
          "bug_type": "309", "os_version": "macOS 15.1 (24B83)", "name": "Python"}


def _write(folder: Path, name: str, pid: int, *, frames: int = 3, age: float = 0.0) -> Path:
    body = {
        "pid": pid, "procName": "Python", "faultingThread": 1,
        "exception": {"type": "EXC_BAD_ACCESS", "signal": "SIGSEGV",
                      "subtype": "KERN_INVALID_ADDRESS at 0x0000000000000000"},
        "threads": [{"frames": [{"imageIndex": 0, "imageOffset": 1}]},
                    {"triggered": True, "frames": [
                        {"imageIndex": 1, "symbol": "vDSP_vflt32", "symbolLocation": 24},
                        {"imageIndex": 2, "symbol": "Espresso::cast_kernel_cpu::__launch",
                         "symbolLocation": 412},
                        {"imageIndex": 7, "imageOffset": 99}] * frames}],
        "usedImages": [{"name": "Python"}, {"name": "libvDSP.dylib"}, {"name": "Espresso"}],
    }
    path = folder / name
    path.write_text(json.dumps(HEADER) + "\n" + json.dumps(body, indent=2))
    if age:
        stamp = time.time() - age
        os.utime(path, (stamp, stamp))
    return path


def test_report_of_the_dead_child_is_found_by_pid(tmp_path: Path) -> None:
    started = time.time() - 5
    _write(tmp_path, "Python-2025-08-20-100000.ips", 111)
    _write(tmp_path, "Python-2025-08-20-095000.ips", 222, age=3600)  # same pid, long ago
    (tmp_path / "garbage.ips").write_text("{not json\n{")
    (tmp_path / "Python-2025-08-20-100001.diag").write_text("")
    wanted = _write(tmp_path, "Python-2025-08-20-100002.ips", 222)
    report = find_crash_report(222, started, tmp_path, wait=0)
    assert report is not None
    assert report["path"] == str(wanted)
    assert report["exception"] == ("EXC_BAD_ACCESS SIGSEGV KERN_INVALID_ADDRESS at "
                                   "0x0000000000000000")
    assert report["frames"][:3] == ["libvDSP.dylib  vDSP_vflt32+24",
                                    "Espresso  Espresso::cast_kernel_cpu::__launch+412",
                                    "?  +99"]


def test_no_report_none_and_size_bounded(tmp_path: Path) -> None:
    started = time.time() - 5
    assert find_crash_report(333, started, tmp_path, wait=0) is None
    assert find_crash_report(333, started, tmp_path / "missing", wait=0) is None
    _write(tmp_path, "old.ips", 333, age=3600)
    assert find_crash_report(333, started, tmp_path, wait=0) is None
    huge = _write(tmp_path, "huge.ips", 333, frames=200)
    with huge.open("a") as handle:
        handle.write(" " * MAX_REPORT_BYTES)
    assert find_crash_report(333, started, tmp_path, wait=0) is None
    long = _write(tmp_path, "long.ips", 333, frames=200)
    report = find_crash_report(333, started, tmp_path, wait=0)
    assert report is not None and report["path"] == str(long)
    assert len(report["frames"]) == MAX_FRAMES
    assert len(json.dumps(report)) < 4096

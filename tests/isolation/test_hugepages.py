"""The fork template's huge-page collapse: memory intact, page tables actually shrunk."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

THP_POLICY = Path("/sys/kernel/mm/transparent_hugepage/enabled")


def _supports_collapse() -> str:
    if not sys.platform.startswith("linux"):
        return "huge pages are collapsed on Linux only"
    major, minor = (int(part) for part in platform.release().split(".")[:2])
    if (major, minor) < (6, 1):
        return f"MADV_COLLAPSE needs Linux 6.1, this is {platform.release()}"
    if not THP_POLICY.exists() or "[never]" in THP_POLICY.read_text():
        return "transparent huge pages are disabled on this machine"
    return ""


# A fresh interpreter: 64 MiB of patterned anonymous memory, collapsed, then checked.
# A bytearray, not a numpy array: numpy already asks for huge pages for large arrays.
_COLLAPSE_AND_CHECK = textwrap.dedent("""
    from nebisect.isolation.osproc import collapse_to_huge_pages

    def huge_kb():
        for line in open("/proc/self/smaps_rollup"):
            if line.startswith("AnonHugePages:"):
                return int(line.split()[1])

    data = bytes(range(256)) * (256 << 10)
    copy = bytearray(data)
    before = huge_kb()
    collapsed = collapse_to_huge_pages()
    intact = copy == data
    print(collapsed >> 20, (huge_kb() - before) >> 10, intact)
""")


@pytest.mark.skipif(bool(_supports_collapse()), reason=_supports_collapse() or "supported")
def test_collapse_backs_anonymous_memory_with_huge_pages_and_keeps_its_contents() -> None:
    done = subprocess.run([sys.executable, "-c", _COLLAPSE_AND_CHECK], capture_output=True,
                          text=True, timeout=120, check=True)
    collapsed_mb, huge_mb, intact = done.stdout.split()
    assert intact == "True"
    assert int(collapsed_mb) >= 60
    assert int(huge_mb) >= 60

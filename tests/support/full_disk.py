"""A real full disk for tests: a tiny tmpfs mounted on a test's directory, then filled.

Mounting needs root (or CAP_SYS_ADMIN); where it is not permitted the tests that need
it are skipped with the reason, and the fault-injection tests still cover the code.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def full_disk(directory: Path, size_kib: int = 64) -> Iterator[Path]:
    """Mount a ``size_kib`` tmpfs on ``directory``, fill it to the last byte, yield it.

    Directories can still be created on it (tmpfs charges no blocks for them), files
    cannot grow: every write fails with ENOSPC. Unmounted on the way out.
    """
    directory.mkdir(parents=True, exist_ok=True)
    mount = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs",
                            str(directory)], capture_output=True, text=True)
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({mount.stderr.strip()}): the "
                    "fault-injection tests cover ENOSPC instead")
    try:
        _fill(directory / "filler")
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], check=True)


def _fill(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        block = b"\0" * 4096
        while True:
            try:
                os.write(fd, block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                block = block[: len(block) // 2]
                if not block:
                    return
    finally:
        os.close(fd)

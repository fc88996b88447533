"""The per-isolator temporary root: case directories, helper logs and the helpers' own
temp files live under it.

Created on first use, removed on close and at interpreter exit, so nothing is left
behind even when the host program forgets to close its isolator. Every case writes and
deletes a handful of small files; on a disk filesystem that costs more than the fork
itself, so on Linux the root goes to tmpfs (/dev/shm) unless the user chose a temp
dir (TMPDIR) or /dev/shm is too small to hold a case's arrays.
"""

from __future__ import annotations

import itertools
import os
import shutil
import sys
import tempfile
from pathlib import Path

_SHM = "/dev/shm"
_SHM_MIN_FREE = 1 << 30


def default_parent() -> str | None:
    """Where temp roots go when the caller does not say: tmpfs if usable, else tempfile's."""
    if os.environ.get("TMPDIR") or not sys.platform.startswith("linux"):
        return None
    try:
        stats = os.statvfs(_SHM)
    except OSError:
        return None
    if stats.f_bavail * stats.f_frsize < _SHM_MIN_FREE or not os.access(_SHM, os.W_OK):
        return None
    return _SHM


class Workspace:
    def __init__(self, parent: str | os.PathLike[str] | None = None) -> None:
        self._parent = parent if parent is not None else default_parent()
        self._root: Path | None = None
        self._counter = itertools.count(1)

    @property
    def root(self) -> Path:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="nebisect-", dir=self._parent))
        return self._root

    def helper_tmp(self) -> Path:
        """The ``TMPDIR`` of the isolator's helpers (fork templates, persistent workers):
        what a helper writes to temp (the conversion template's rehearsal packages) is
        removed with the root, also when the helper was killed half-way."""
        path = self.root / "helper-tmp"
        path.mkdir(exist_ok=True)
        return path

    def new_case_dir(self) -> Path:
        path = self.root / f"case-{next(self._counter)}"
        path.mkdir()
        return path

    def remove(self) -> None:
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

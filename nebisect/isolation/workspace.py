"""The per-isolator temporary root: case directories, helper logs and the helpers' own
temp files live under it.

Created on first use, removed on close and at interpreter exit, so nothing is left
behind even when the host program forgets to close its isolator. Every case writes and
deletes a handful of small files; on a disk filesystem that costs more than the fork
itself, so on Linux the root goes to tmpfs (/dev/shm) unless the user chose a temp
dir (TMPDIR) or /dev/shm is too small to hold a case's arrays.

A case is the user's code with the user's rights: it may delete the root. The root (and
the helpers' temp dir in it) is then made again on next use, so one such case costs
its own verdict, not the run.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

_SHM = "/dev/shm"
_SHM_MIN_FREE = 1 << 30
_HELPER_TMP = "helper-tmp"
#: torch's compile cache (``$TMPDIR/torchinductor_$USER`` by default), which torch.export
#: fills in whatever process imports it
TORCH_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"


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
        """The temp root, made on first use and again when something deleted it."""
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="nebisect-", dir=self._parent))
        elif not os.path.lexists(self._root):
            self._root.mkdir(mode=0o700, exist_ok=True)
            (self._root / _HELPER_TMP).mkdir(exist_ok=True)  # running helpers' TMPDIR
        return self._root

    def helper_tmp(self) -> Path:
        """The ``TMPDIR`` of the isolator's helpers (fork templates, persistent workers):
        what a helper writes to temp (the conversion template's rehearsal packages) is
        removed with the root, also when the helper was killed half-way."""
        path = self.root / _HELPER_TMP
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


@contextlib.contextmanager
def own_torch_cache() -> Iterator[None]:
    """torch's compile cache, for this process and the children it starts, in a temp dir
    of its own that is removed at the end (also after an interruption): a command whose
    own process imports torch (the atlas's op database, a saved program) leaves no
    ``torchinductor_$USER`` behind in ``$TMPDIR``. A cache the user chose
    (``$TORCHINDUCTOR_CACHE_DIR``) is the user's and stays."""
    if os.environ.get(TORCH_CACHE_ENV):
        yield
        return
    path = tempfile.mkdtemp(prefix="nebisect-torch-cache-")
    os.environ[TORCH_CACHE_ENV] = path
    try:
        yield
    finally:
        os.environ.pop(TORCH_CACHE_ENV, None)
        shutil.rmtree(path, ignore_errors=True)

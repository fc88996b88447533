"""The per-isolator temporary root: case directories and helper logs live under it.

Created on first use under the system temp dir (or a caller-chosen parent), removed
on close and at interpreter exit, so nothing is left behind even when the host
program forgets to close its isolator.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from pathlib import Path


class Workspace:
    def __init__(self, parent: str | Path | None = None) -> None:
        self._parent = parent
        self._root: Path | None = None
        self._counter = itertools.count(1)

    @property
    def root(self) -> Path:
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="nebisect-", dir=self._parent))
        return self._root

    def new_case_dir(self) -> Path:
        path = self.root / f"case-{next(self._counter)}"
        path.mkdir()
        return path

    def remove(self) -> None:
        if self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
            self._root = None

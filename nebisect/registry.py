"""Self-registering modules, imported once before their registry is first read.

Targets, simulator kernels, fuzz op specs and fixes all register themselves as a side
effect of importing their modules; each registry imports its modules on first lookup.
That first lookup can come from several threads at once (the ``--jobs`` workers of
``fuzz``, ``fix verify`` and ``replay``), so the loading is done under a lock and
counted as done only once every import finished: a thread arriving meanwhile waits
instead of reading a half-filled registry (which once made ``sim:fp32`` "not
implemented" in one of two worker threads).
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterable


class ImportOnce:
    """Import the modules ``names()`` lists, once per process, thread-safely."""

    def __init__(self, names: Callable[[], Iterable[str]]) -> None:
        self._names = names
        self._done = False
        # Re-entrant: a module being imported may itself look something up.
        self._lock = threading.RLock()

    def __call__(self) -> None:
        if self._done:
            return
        with self._lock:
            if not self._done:
                for name in self._names():
                    importlib.import_module(name)
                self._done = True


def package_modules(package: str, *, skip: Iterable[str] = ()) -> Callable[[], list[str]]:
    """The public modules of ``package`` (not ``_private`` ones, not ``skip``), by name."""
    skipped = frozenset(skip)

    def names() -> list[str]:
        path = importlib.import_module(package).__path__
        return [
            f"{package}.{info.name}"
            for info in pkgutil.iter_modules(path)
            if info.name not in skipped and not info.name.startswith("_")
        ]

    return names

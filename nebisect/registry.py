"""Self-registering modules, imported once before their registry is first read.

Targets, simulator kernels, device profiles, fuzz op specs, value families, fixes, lint
rules and interval transfers all register themselves as a side effect of importing their
modules; each registry imports its modules on first lookup.
That first lookup can come from several threads at once (the ``--jobs`` workers of
``fuzz``, ``fix verify`` and ``replay``), so the loading is done under a lock and
counted as done only once every import finished: a thread arriving meanwhile waits
instead of reading a half-filled registry (which once made ``sim:fp32`` "not
implemented" in one of two worker threads).

:class:`Registry` is the one name → entry table those plug-in families share (DESIGN §3):
registered by a decorator under a unique name, a duplicate is an error (two modules
claiming one name is a bug, not a user choice), an unknown name is a user error that
lists the known ones, and every read loads the self-registering modules first.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from nebisect.errors import NebisectError

#: A name: a string, or a tuple of strings where one string does not tell entries apart.
K = TypeVar("K", bound=str | tuple[str, ...])
T = TypeVar("T")


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


class Registry(Generic[K, T]):
    """Entries of one plug-in family by unique name; ``load`` runs before every read.

    ``kind`` names the family in messages ("value family 'x' registered twice"). A name
    is a string, or a tuple of strings for a family whose entries one string does not
    tell apart (simulator kernels: op type and variant), so that family needs no table
    of its own.
    """

    def __init__(self, kind: str, load: Callable[[], None] = lambda: None) -> None:
        self.kind = kind
        self._load = load
        self._entries: dict[K, T] = {}

    def load(self) -> None:
        """Import every module that registers entries, now rather than on first read: a
        fork template calls this so that its children inherit the imports."""
        self._load()

    def register(self, name: K, entry: T) -> T:
        """Add ``entry`` under ``name``; a name registered twice is a ValueError."""
        return self.register_all((name,), entry)

    def register_all(self, names: Iterable[K], entry: T) -> T:
        """Add ``entry`` under every name of ``names``, or, if one is taken, under none:
        a failed registration leaves no half of itself behind."""
        fresh: dict[K, T] = {}
        for name in names:
            if name in self._entries or name in fresh:
                raise ValueError(f"{self.kind} {name!r} registered twice")
            fresh[name] = entry
        self._entries.update(fresh)
        return entry

    def get(self, name: K) -> T:
        """The entry registered as ``name``; an unknown name is a user error naming the
        closest known ones."""
        self._load()
        if name in self._entries:
            return self._entries[name]
        known = sorted(str(key) for key in self._entries)
        close = difflib.get_close_matches(str(name), known, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise NebisectError(f"unknown {self.kind} {name!r}{hint}; known: {', '.join(known)}")

    def items(self) -> list[tuple[K, T]]:
        """Every (name, entry), in name order."""
        self._load()
        return sorted(self._entries.items(), key=lambda item: item[0])

    def names(self) -> list[K]:
        return [name for name, _ in self.items()]

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

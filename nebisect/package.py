"""An ``.mlpackage`` on disk: its manifest, and the rule that nothing in it leads outside it.

A package is a folder whose ``Manifest.json`` names its items — the root model, the
weights directory — by paths under ``Data/``. A package is untrusted input (a download, a
corpus case from a pull request), so before any file of it is opened,
:func:`check_package` proves that every path in it stays inside it: each item path is
relative and plain (not absolute, no ``..``), and every symlink in the folder resolves
to a place inside the package. A manifest naming ``/etc/passwd`` or ``../x``, a symlink
out, a FIFO or a device is one :class:`PackageError` line; nothing outside is read.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from nebisect.errors import NebisectError
from nebisect.files import MAX_JSON_CHARS, open_regular, parse_untrusted_json, walk

MANIFEST = "Manifest.json"
#: the folder of a package the manifest's item paths are relative to
DATA_DIR = "Data"


class PackageError(NebisectError):
    """A package whose manifest or files lead outside it, or whose manifest is unusable."""


@dataclass(frozen=True)
class Item:
    """One manifest entry: its path under ``Data/``, and its name and author."""

    path: str
    name: str = ""
    author: str = ""


@dataclass(frozen=True)
class Manifest:
    """What a checked manifest names: the root model and every item (the root among them)."""

    root: Item
    items: tuple[Item, ...]


def item_path(package: Path, item: Item) -> Path:
    """Where ``item`` of a checked package lives."""
    return package / DATA_DIR / item.path


def check_package(package: Path, label: str = "") -> Manifest:
    """The manifest of ``package``, once every path in the package is proven to stay
    inside it; else :class:`PackageError` naming the package as ``label`` (default: its
    path) and what leads out.

    Every symlink must resolve inside the package; with that, a plain relative item
    path (no ``..``, not absolute) cannot leave it either.
    """
    where = label or str(package)
    inside = Path(os.path.realpath(package))
    for entry, mode in walk(package):
        name = entry.relative_to(package).as_posix()
        if stat.S_ISLNK(mode):
            target = Path(os.path.realpath(entry))
            if not target.is_relative_to(inside):
                raise PackageError(f"{where}: {name} is a symlink to {target}, outside the "
                                   "package")
        elif not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
            raise PackageError(f"{where}: {name} is not a regular file")
    manifest = _read_manifest(package, where)
    for item in manifest.items:
        parts = PurePosixPath(item.path).parts
        if (not item.path or item.path.startswith("/") or "\\" in item.path
                or any(part in ("", ".", "..") for part in parts)):
            raise PackageError(f"{where}: {MANIFEST} names {item.path!r}, a path outside the "
                               "package")
    return manifest


def _read_manifest(package: Path, where: str) -> Manifest:
    """The manifest's items and root, read as untrusted JSON."""
    try:
        with open_regular(package / MANIFEST) as handle:
            text = handle.read(MAX_JSON_CHARS + 1).decode()
        document = parse_untrusted_json(text)
    except FileNotFoundError:
        raise PackageError(f"{where}: not an .mlpackage (no {MANIFEST})") from None
    except (NebisectError, ValueError) as exc:
        raise PackageError(f"{where}: {MANIFEST} {exc}") from None
    entries = document.get("itemInfoEntries") if isinstance(document, dict) else None
    if not isinstance(entries, dict) or not all(
            isinstance(e, dict) and isinstance(e.get("path"), str) for e in entries.values()):
        raise PackageError(f"{where}: {MANIFEST} lists no items with paths")
    items = {key: Item(e["path"], str(e.get("name", "")), str(e.get("author", "")))
             for key, e in entries.items()}
    key = document.get("rootModelIdentifier")
    root = items.get(key) if isinstance(key, str) else None
    if root is None:
        raise PackageError(f"{where}: {MANIFEST} names no root model among its items")
    return Manifest(root, tuple(items.values()))

"""The records that cross the wire between nebisect and an executor's workers.

A :class:`Unit` is one independent piece of work — a corpus case to replay, a case to
verify fixes on, a fuzz campaign shard: a registered ``kind``, a JSON ``payload`` and
the files it needs, named by their path relative to the unit's root and travelling by
sha256. A result comes back as the JSON the kind's handler returned. Nothing is
pickled but strings, bytes and dicts of them: a worker hands nebisect data, never code
(the same rule as the isolation boundary, :mod:`nebisect.isolation.job`).

A handler is ``handler(arguments, root, workdir, isolator) -> dict``: ``arguments`` is
the record its first parameter is annotated with, read from the unit's ``payload`` (that
record's JSON object, :func:`~nebisect.codec.encode`) by :func:`run_unit_here`; ``root`` is a
directory holding the unit's files under their relative names (locally, where they
already are; on a worker, a fresh directory materialized from the blob cache),
``workdir`` a private scratch directory, ``isolator`` the calling thread's
:class:`~nebisect.isolation.isolator.Isolator`. Handlers are named here by
``module:function`` (never imported until a unit runs), so this module stays at the
bottom of the layers and a worker imports only what the kind needs.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from nebisect.codec import Record, arguments_for
from nebisect.errors import NebisectError

if TYPE_CHECKING:
    from nebisect.isolation.isolator import Isolator

#: kind → the handler that runs a unit of that kind (see the module docstring)
UNIT_KINDS = {
    "replay": "nebisect.guard.replay:replay_unit",
    "verify": "nebisect.guard.verify:verify_unit",
    "fuzz": "nebisect.fuzzing.session:fuzz_unit",
    "fuzz-model": "nebisect.fuzzing.model_session:model_shard_unit",
    "run-cell": "nebisect.detect.remote:cell_unit",
}
#: the signature of a unit no attempt finished (its workers died, its handler raised)
LOST_SIGNATURE = "error:executor:no verdict"

Handler = Callable[[Any, Path, Path, "Isolator"], dict[str, Any]]


def handler(kind: str) -> Handler:
    """The handler registered for ``kind`` (an unknown kind is an error, not an import)."""
    if kind not in UNIT_KINDS:
        raise NebisectError(f"unknown unit kind {kind!r}: one of {', '.join(UNIT_KINDS)}")
    module, _, name = UNIT_KINDS[kind].partition(":")
    function: Handler = getattr(importlib.import_module(module), name)
    return function


def run_unit_here(unit: Unit, root: Path, workdir: Path, isolator: Isolator) -> dict[str, Any]:
    """What ``unit``'s handler returns for its arguments (read as the handler's record)."""
    function = handler(unit.kind)
    return function(arguments_for(function, unit.payload), root, workdir, isolator)


def _plain(value: Any) -> Any:
    """numpy scalars and arrays as plain Python (what a handler's dict may hold)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def to_wire(value: Any) -> str:
    """A handler's result as the JSON text that crosses the wire (NaN/Infinity kept)."""
    return json.dumps(value, default=_plain)


def check_relative(name: str) -> str:
    """``name`` if it is a plain relative path (no ``..``, no absolute, no backslash)."""
    parts = PurePosixPath(name).parts
    if (not name or name.startswith("/") or "\\" in name or name != "/".join(parts)
            or any(part in ("", ".", "..") for part in parts)):
        raise NebisectError(f"unit file {name!r} is not a plain relative path")
    return name


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Unit:
    """One unit of work.

    ``paths`` are its files and folders, relative to ``root`` — where they are on this
    machine (``root`` is not sent). ``files`` is the wire form: every regular file
    below them with its sha256 (:meth:`manifest` on the sending side).
    """

    kind: str
    payload: dict[str, Any]
    paths: list[str] = field(default_factory=list)
    root: Path | None = None
    label: str = ""
    files: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.kind not in UNIT_KINDS:
            raise NebisectError(f"unknown unit kind {self.kind!r}: one of {', '.join(UNIT_KINDS)}")
        for name in [*self.paths, *self.files]:
            check_relative(name)

    def manifest(self) -> dict[str, str]:
        """Every regular file under :attr:`paths` → its sha256. Symlinks and special files
        are left out (never followed): the worker sees them missing, and the kind's
        handler judges that as it would locally (a corpus case is then damaged)."""
        assert self.root is not None, "a unit without a root has no files to read"
        found: dict[str, str] = {}
        for name in self.paths:
            for relative in _regular_files(self.root, name):
                data = read_regular(self.root / relative)
                if data is not None:
                    found[relative] = sha256_hex(data)
        return found

    def to_json(self, files: dict[str, str]) -> str:
        """The wire form: kind, payload and file hashes (bytes travel separately)."""
        return json.dumps({"kind": self.kind, "payload": self.payload, "files": files,
                           "label": self.label}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Unit:
        body = json.loads(text)
        return cls(body["kind"], body["payload"], label=body["label"],
                   files=dict(body["files"]))

    def blob(self, name: str, digest: str) -> bytes | None:
        """``name``'s bytes if it is still a regular file with sha256 ``digest``."""
        assert self.root is not None, "a unit without a root has no files to read"
        data = read_regular(self.root / name)
        return data if data is not None and sha256_hex(data) == digest else None


def _regular_files(root: Path, name: str) -> list[str]:
    """``name`` if it is a file, else the files below it (symlinks not followed)."""
    path = root / name
    if not path.is_dir() or path.is_symlink():
        return [name]
    found = []
    for folder, dirs, files in os.walk(path):
        dirs.sort()
        for file in sorted(files):
            found.append((Path(folder) / file).relative_to(root).as_posix())
    return found


def read_regular(path: Path) -> bytes | None:
    """The bytes of ``path`` if it is a regular file reached without a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None
        return handle.read()


@dataclass
class Attempt(Record):
    """One execution of a unit: where, and how it ended (``done``, ``lost``, ``error``)."""

    worker: str
    outcome: str
    detail: str = ""


@dataclass
class UnitResult:
    """What a unit's handler returned, and every attempt it took to get it.

    ``value`` is None when no attempt finished (two workers died under it, or the
    handler raised): ``error`` says why, and the caller turns that into its own
    ``error`` verdict.
    """

    value: dict[str, Any] | None
    attempts: list[Attempt] = field(default_factory=list)
    error: str = ""

    @property
    def worker(self) -> str:
        return self.attempts[-1].worker if self.attempts else ""

    def describe_attempts(self) -> list[dict[str, str]]:
        return [a.to_dict() for a in self.attempts]

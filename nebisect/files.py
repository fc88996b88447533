"""The one place nebisect writes files and directories, and reads files it cannot trust.

Writes are atomic: the new content is built under a temporary name beside its target
(same file system) and renamed over it, so a reader sees the old version or the new
one, never half of either. A write that fails — a full disk, a read-only directory —
removes its temporary and raises one :class:`~nebisect.errors.NebisectError` naming the
target and the reason (``cannot write out/summary.json: No space left on device``),
which the CLI prints on one line with exit 2: no traceback, no debris.

Replacing a directory (an ``.mlpackage``, a ``bisect --out``) must never leave a
moment with no directory at the target: on Linux the new one and the old one trade
places in one ``renameat2(RENAME_EXCHANGE)``; where that is unavailable (macOS, a file
system without it) the old one is renamed aside and the new one in, a window of two
renames.

Reads of files another process wrote (a case child's result, its stderr capture) go
through :func:`read_untrusted`: no symlink is followed, a FIFO never blocks, only a
regular file is read, and never more than a cap — so a child that leaves a FIFO or a
link to ``/dev/zero`` where its result belongs cannot hang or exhaust the parent.

JSON nebisect did not write (a corpus case's ``case.json``, a package's
``Manifest.json``) is parsed by :func:`parse_untrusted_json`, within limits of size,
nesting and number length, and without duplicate keys: a hostile file is one
``ValueError`` naming what is wrong, never a ``RecursionError`` or a quadratic integer
conversion, and it cannot mean one thing to one reader and another to the next.
:func:`read_json` is the one reader of a JSON file a user names or finds on disk (a
saved atlas, a report, a ``triggers.json``, a cache entry): a regular file only, at
most a cap of bytes, parsed by :func:`parse_untrusted_json`, every problem one line
naming the file.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import json
import os
import re
import shutil
import stat
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from nebisect.errors import NebisectError

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
#: errnos by which renameat2 says "not here" (no syscall, no support in this file system).
_NO_EXCHANGE = {errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM}


class WriteError(NebisectError):
    """A write that failed: the path as its caller named it, and the reason."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"cannot write {path}: {reason}")
        self.path = path
        self.reason = reason


def write_failure(target: str | os.PathLike[str], exc: OSError) -> WriteError:
    """The one-line error for a write of ``target`` that failed with ``exc``."""
    return WriteError(Path(target), os_reason(exc))


def os_reason(exc: OSError) -> str:
    """Why ``exc`` happened, in a few words (``No space left on device``).

    Its ``strerror``; but :func:`shutil.copytree` raises ``shutil.Error`` with no errno,
    whose message is the list of every failed copy, temporary paths and all: its first
    failure's reason stands for it.
    """
    if exc.strerror:
        return exc.strerror
    failures = exc.args[0] if isinstance(exc, shutil.Error) and exc.args else None
    if isinstance(failures, list) and failures and isinstance(failures[0], tuple):
        why = str(failures[0][-1])  # "[Errno 28] No space left on device: 'a' -> 'b'"
        found = re.match(r"\[Errno (\d+)\] ", why)
        return os.strerror(int(found.group(1))) if found else (why.splitlines() or [why])[0]
    return str(exc)


def write_bytes(path: str | os.PathLike[str], data: bytes | memoryview, *,
                durable: bool = False) -> Path:
    """Replace ``path`` with ``data`` atomically; missing parent directories are created.

    ``durable`` also fsyncs the file and its directory (the corpus, whose records must
    survive a power cut); scratch files skip it, it costs milliseconds per write.
    """
    target = Path(path)
    tmp = _temp_beside(target)
    try:
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except FileNotFoundError:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
        if durable:
            fsync_directory(target.parent)
    except OSError as exc:
        _remove(tmp)
        raise write_failure(target, exc) from None
    except BaseException:
        _remove(tmp)
        raise
    return target


def write_text(path: str | os.PathLike[str], text: str, *, durable: bool = False) -> Path:
    """:func:`write_bytes` of ``text`` as UTF-8."""
    return write_bytes(path, text.encode("utf-8"), durable=durable)


def replace(new: Path, target: Path) -> None:
    """Move ``new`` (a file or a directory) to ``target``, replacing what is there.

    Called with ``new`` inside a temporary directory that the caller removes: after an
    exchange, the old version is at ``new``.
    """
    if new.is_dir() and target.is_dir() and not target.is_symlink():
        if _exchange(new, target):
            return
        aside = new.with_name(f".{new.name}.old")
        os.rename(target, aside)
        try:
            os.rename(new, target)
        except OSError:
            os.rename(aside, target)
            raise
        return
    os.replace(new, target)


def keep_existing(new: Path, target: Path) -> None:
    """Move ``new`` to ``target`` unless something is there already: for content-addressed
    caches, where the same name means the same content (another writer got there first)."""
    if target.exists():
        return
    try:
        os.rename(new, target)
    except OSError:
        if not target.exists():
            raise


def merge_into(new: Path, target: Path) -> None:
    """Move each entry of the directory ``new`` into the directory ``target``, replacing
    its namesake there (each atomically); the other entries of ``target`` are kept."""
    target.mkdir(exist_ok=True)
    for entry in sorted(new.iterdir()):
        replace(entry, target / entry.name)


@contextlib.contextmanager
def staged(path: str | os.PathLike[str],
           publish: Callable[[Path, Path], None] = replace) -> Iterator[Path]:
    """A path to build a file or directory at, published at ``path`` when the block ends.

    The yielded path does not exist yet; it lies in a private temporary directory beside
    ``path``. After the block, ``publish(built, path)`` puts it in place — by default
    :func:`replace`; :func:`keep_existing` and :func:`merge_into` are the others. On an
    exception nothing is published and the temporary is removed; an OSError (a full
    disk) becomes one line naming ``path`` (or the file inside it, as it would have
    been named once published).
    """
    target = Path(path)
    holder = _temp_beside(target)
    try:
        holder.mkdir(parents=True)
        built = holder / target.name
        yield built
        publish(built, target)
    except OSError as exc:
        raise write_failure(target, exc) from None
    except WriteError as exc:
        # A write inside the block names a path in the private directory; the user
        # knows it by its published name.
        inside = exc.path.is_relative_to(built)
        where = target / exc.path.relative_to(built) if inside else target
        raise WriteError(where, exc.reason) from None
    finally:
        shutil.rmtree(holder, ignore_errors=True)


def copy_directory(source: str | os.PathLike[str], destination: str | os.PathLike[str]) -> Path:
    """Copy a directory tree to ``destination``, replacing what was there atomically."""
    with staged(destination) as built:
        shutil.copytree(source, built)
    return Path(destination)


def _exchange(new: Path, target: Path) -> bool:
    """Swap two paths in one step (Linux ``renameat2``); False where that is unavailable."""
    function = getattr(_libc(), "renameat2", None)
    if function is None:
        return False
    if function(_AT_FDCWD, os.fsencode(new), _AT_FDCWD, os.fsencode(target),
                _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in _NO_EXCHANGE:
        return False
    raise OSError(code, os.strerror(code), str(target))


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def fsync_directory(path: Path) -> None:
    """Make a directory's entries (a rename into it) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temp_beside(target: Path) -> Path:
    """A fresh hidden name in ``target``'s directory, unique per process and call."""
    return target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def open_regular(path: str | os.PathLike[str], *, follow_symlinks: bool = True) -> BinaryIO:
    """Open ``path`` for reading only if it is a regular file (never blocks on a FIFO).

    Raises NebisectError for anything else (a FIFO, a device, a directory; a symlink
    when ``follow_symlinks`` is off), its message to follow the caller's name for the
    file, and OSError when it cannot be opened at all.
    """
    file = Path(path)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if not follow_symlinks:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(file, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow_symlinks:
            raise NebisectError("is a symbolic link") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NebisectError(f"is not a regular file but {_kind(mode)}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def walk(root: Path) -> Iterator[tuple[Path, int]]:
    """Every entry below ``root``, depth first in name order, with its lstat mode:
    symlinks are reported, never followed."""
    with os.scandir(root) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            mode = entry.stat(follow_symlinks=False).st_mode
            yield Path(entry.path), mode
            if stat.S_ISDIR(mode):
                yield from walk(Path(entry.path))


def read_untrusted(path: str | os.PathLike[str], limit: int, *, tail: bool = False) -> bytes:
    """The bytes of a regular file another process wrote, at most ``limit`` of them.

    Symlinks are refused, not followed. Over ``limit`` is an error, or with ``tail`` the
    last ``limit`` bytes are returned (a stderr capture). Raises NebisectError for a file
    that is not to be read and OSError for one that cannot be.
    """
    with open_regular(path, follow_symlinks=False) as handle:
        size = os.fstat(handle.fileno()).st_size
        if tail:
            handle.seek(max(0, size - limit))
        data = handle.read(limit + 1)
    if len(data) <= limit:
        return data
    if tail:
        return data[-limit:]
    raise NebisectError(f"is larger than {limit} bytes")


def _kind(mode: int) -> str:
    kinds = {stat.S_ISFIFO: "a FIFO", stat.S_ISCHR: "a character device",
             stat.S_ISBLK: "a block device", stat.S_ISDIR: "a directory",
             stat.S_ISSOCK: "a socket"}
    return next((name for test, name in kinds.items() if test(mode)), "something else")


#: Limits of :func:`parse_untrusted_json`: characters, nesting of arrays and objects, and
#: characters of one number (a 5 001-digit integer took Python's int() past its limit).
MAX_JSON_CHARS = 1 << 20
MAX_JSON_DEPTH = 32
MAX_JSON_NUMBER = 40
#: The largest document nebisect writes and reads back (a saved atlas of every op, a
#: long run's report.json: tens of MB at most).
MAX_DOCUMENT_BYTES = 64 << 20
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_JSON_NESTING = re.compile(r"[\[\]{}]")


def read_json(path: str | os.PathLike[str], limit: int = MAX_DOCUMENT_BYTES, *,
              follow_symlinks: bool = True, nonfinite: bool = False) -> Any:
    """The JSON value in the file ``path``: a regular file (a FIFO never blocks, a device
    is never read) of at most ``limit`` bytes of UTF-8, parsed by
    :func:`parse_untrusted_json` (``nonfinite``: as it says). Raises NebisectError, one
    line starting with the path (``a.json: is nested deeper than 32 levels``)."""
    try:
        with open_regular(path, follow_symlinks=follow_symlinks) as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise NebisectError(f"{path}: cannot read it ({os_reason(exc)})") from None
    except ValueError as exc:  # a NUL byte in the name
        raise NebisectError(f"{path}: cannot read it ({exc})") from None
    except NebisectError as exc:
        raise NebisectError(f"{path}: {exc}") from None
    if len(data) > limit:
        raise NebisectError(f"{path}: is larger than {limit} bytes")
    try:
        return parse_untrusted_json(data.decode("utf-8"), limit, nonfinite=nonfinite)
    except UnicodeDecodeError:
        raise NebisectError(f"{path}: is not UTF-8 text") from None
    except ValueError as exc:
        raise NebisectError(f"{path}: {exc}") from None


def parse_untrusted_json(text: str, max_chars: int = MAX_JSON_CHARS, *,
                         nonfinite: bool = False) -> Any:
    """The value of a JSON document nebisect did not write, within the limits above
    (``max_chars`` characters at most).

    The nesting is measured before parsing (the parser recurses per level), numbers are
    converted only when short, a key repeated in one object is refused, and so are
    ``NaN``/``Infinity`` (not JSON) unless ``nonfinite`` (a verdict's metrics, which
    Python's json writes so). Raises ValueError whose message follows the document's
    name (``case.json is nested deeper than 32 levels``).
    """
    if len(text) > max_chars:
        raise ValueError(f"is longer than {max_chars} characters")
    depth = 0
    for bracket in _JSON_NESTING.finditer(_JSON_STRING.sub("", text)):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"is nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text, parse_int=functools.partial(_json_number, int),
                          parse_float=functools.partial(_json_number, float),
                          parse_constant=float if nonfinite else _json_constant,
                          object_pairs_hook=_json_object)
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not valid JSON ({exc.msg}, line {exc.lineno})") from None


def _json_number(kind: type[int] | type[float], text: str) -> int | float:
    if len(text) > MAX_JSON_NUMBER:
        raise ValueError(f"holds a number longer than {MAX_JSON_NUMBER} characters")
    return kind(text)


def _json_constant(name: str) -> Any:
    raise ValueError(f"is not valid JSON ({name} is no JSON number)")


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise ValueError(f"holds the key {key!r} twice in one object")
        seen.add(key)
    return dict(pairs)

"""The one place nebisect writes files and directories, and reads files it cannot trust.

Writes are atomic: the new content is built under a temporary name beside its target
(same file system) and renamed over it, so a reader sees the old version or the new
one, never half of either. A write that fails — a full disk, a read-only directory —
removes its temporary and raises one :class:`~nebisect.case.NebisectError` naming the
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
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from nebisect.case import NebisectError

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2
#: errnos by which renameat2 says "not here" (no syscall, no support in this file system).
_NO_EXCHANGE = {errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM}


def write_failure(target: str | os.PathLike[str], exc: OSError) -> NebisectError:
    """The one-line error for a write of ``target`` that failed with ``exc``."""
    return NebisectError(f"cannot write {target}: {exc.strerror or exc}")


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


@contextlib.contextmanager
def staged(path: str | os.PathLike[str], *, keep_existing: bool = False) -> Iterator[Path]:
    """A path to build a file or directory at, published at ``path`` when the block ends.

    The yielded path does not exist yet; it lies in a private temporary directory beside
    ``path``. After the block, whatever was built there replaces ``path`` atomically
    (:func:`replace`), or, with ``keep_existing``, is dropped if ``path`` already exists
    (content-addressed caches: the same name means the same content). On an exception
    nothing is published and the temporary is removed; an OSError becomes one line.
    """
    target = Path(path)
    holder = _temp_beside(target)
    try:
        holder.mkdir(parents=True)
        built = holder / target.name
        yield built
        if not keep_existing:
            replace(built, target)
        elif not target.exists():
            _publish_new(built, target)
    except OSError as exc:
        raise write_failure(target, exc) from None
    finally:
        shutil.rmtree(holder, ignore_errors=True)


def copy_directory(source: str | os.PathLike[str], destination: str | os.PathLike[str]) -> Path:
    """Copy a directory tree to ``destination``, replacing what was there atomically."""
    with staged(destination) as built:
        shutil.copytree(source, built)
    return Path(destination)


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


def _publish_new(built: Path, target: Path) -> None:
    """Rename ``built`` to ``target`` unless another writer got there first."""
    try:
        os.rename(built, target)
    except OSError:
        if not target.exists():
            raise


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

"""Arrays and content hashes: what makes a case's bytes its identity.

Hashing (:func:`sha256_path` of a file or a package by its content,
:func:`sha256_arrays` of named arrays) gives a case its content address; the ``.npz``
reader takes untrusted files — ``--inputs``, a corpus case, a child's arrays — with no
pickle and nothing larger than :func:`max_input_bytes`, each member's header checked
before its data is read.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import stat
import zipfile
from pathlib import Path
from typing import Any, cast

import numpy as np
from numpy.lib import format as npformat

from nebisect.errors import NebisectError
from nebisect.files import MAX_JSON_CHARS, open_regular, parse_untrusted_json, walk, write_bytes
from nebisect.package import MANIFEST


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_path(path: str | os.PathLike[str]) -> str:
    """Hash a file, or a directory (an ``.mlpackage``) by its content, deterministically.

    Directories hash the sorted relative paths together with each file's bytes, so a
    renamed weight file or a changed spec changes the hash, and the traversal order of
    the file system does not. A symlink inside is hashed as the link it is, never
    followed: hashing reads nothing outside the directory. A package's
    ``Manifest.json`` is hashed by what it *means* — which path is the root model and
    which items exist — not by its item identifiers: coremltools draws those as random
    UUIDs on every save, and hashing them made two saves of one program two cases and
    two compilations (see :func:`_manifest_meaning`).
    """
    root = Path(path)
    digest = hashlib.sha256()
    if root.is_file():
        _hash_file_into(digest, root)
        return digest.hexdigest()
    if not root.is_dir():
        raise NebisectError(f"{root}: no such file or directory")
    for file, mode in walk(root):
        rel = file.relative_to(root).as_posix()
        encoded = rel.encode()
        if stat.S_ISLNK(mode):
            digest.update(len(encoded).to_bytes(8, "little") + encoded)
            digest.update(b"symlink" + os.fsencode(os.readlink(file)))
            continue
        if not stat.S_ISREG(mode):
            continue
        meaning = _manifest_meaning(file) if rel == MANIFEST else None
        digest.update(len(encoded).to_bytes(8, "little") + encoded)
        if meaning is not None:
            digest.update(b"manifest-meaning" + meaning)
            continue
        digest.update(file.stat().st_size.to_bytes(8, "little"))
        _hash_file_into(digest, file)
    return digest.hexdigest()


def _manifest_meaning(file: Path) -> bytes | None:
    """The manifest without its identifiers: format version, root model path, items.

    Each item is kept as (path, name, author, description) and the root is named by its
    path, so a manifest that points the root at another file, or lists another weight
    file, still changes the hash. None when the file is not such a manifest (then its
    bytes are hashed as they are).
    """
    if file.stat().st_size > MAX_JSON_CHARS:
        return None
    try:
        document = parse_untrusted_json(file.read_bytes().decode())
        entries = document["itemInfoEntries"]
        items = sorted(
            [str(e.get("path")), str(e.get("name")), str(e.get("author")),
             str(e.get("description"))]
            for e in entries.values()
        )
        root = entries[document["rootModelIdentifier"]].get("path")
        meaning = [str(document.get("fileFormatVersion")), str(root), items]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return json.dumps(meaning).encode()


def _hash_file_into(digest: Any, file: Path) -> None:
    with file.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)


def sha256_arrays(arrays: dict[str, np.ndarray]) -> str:
    """Hash named arrays by name, dtype, shape and bytes (not by an npz's zip metadata)."""
    digest = hashlib.sha256()
    for name in sorted(arrays):
        array = np.ascontiguousarray(arrays[name])
        header = json.dumps([name, array.dtype.str, list(array.shape)]).encode()
        digest.update(len(header).to_bytes(8, "little") + header)
        digest.update(array.tobytes())
    return digest.hexdigest()


def save_npz(path: str | os.PathLike[str], arrays: dict[str, np.ndarray]) -> None:
    """Write arrays atomically (temp file + rename): a reader never sees half an npz."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds badly
    write_bytes(path, buffer.getbuffer())


#: Environment variable that caps the bytes an ``.npz`` may expand to (``--inputs``, a
#: corpus case's inputs, a case child's arrays): a 7 MB zip of zeros can declare 8 GB.
MAX_INPUT_BYTES_VAR = "NEBISECT_MAX_INPUT_BYTES"
DEFAULT_MAX_INPUT_BYTES = 1 << 30
INPUTS_LIMIT_HELP = (f"Arrays are refused above {MAX_INPUT_BYTES_VAR} bytes in total "
                     "(default 1 GiB).")


def max_input_bytes() -> int:
    """The decoded size an ``.npz`` may have, from :data:`MAX_INPUT_BYTES_VAR`."""
    text = os.environ.get(MAX_INPUT_BYTES_VAR, "")
    if not text:
        return DEFAULT_MAX_INPUT_BYTES
    try:
        limit = int(text)
    except ValueError:
        limit = 0
    if limit <= 0:
        raise NebisectError(f"{MAX_INPUT_BYTES_VAR}={text!r}: expected a positive byte count")
    return limit


def load_npz(path: str | os.PathLike[str], *,
             follow_symlinks: bool = True) -> dict[str, np.ndarray]:
    """Load an npz of plain numeric arrays: no pickle, nothing larger than the limit.

    Each member's npy header is read before its data (:func:`_read_members`), so a zip
    bomb is refused by its declared shape instead of being expanded. A truncated or
    foreign file is a one-line error; so is a FIFO or a device where a file belongs.
    """
    file = Path(path)
    limit = max_input_bytes()
    try:
        with (open_regular(file, follow_symlinks=follow_symlinks) as handle,
              zipfile.ZipFile(handle) as archive):
            return _read_members(archive, limit)
    except FileNotFoundError:
        raise NebisectError(f"{file}: no such inputs file") from None
    except NebisectError as exc:
        raise NebisectError(f"{file}: {exc}") from None
    except (ValueError, zipfile.BadZipFile) as exc:
        raise NebisectError(f"{file}: not a plain numeric .npz ({exc})") from None
    except Exception as exc:
        raise NebisectError(f"{file}: unreadable .npz ({type(exc).__name__}: {exc})") from None


def load_npz_bytes(data: bytes, label: str) -> dict[str, np.ndarray]:
    """:func:`load_npz` of an ``.npz`` held in memory (a saved program's extra file);
    ``label`` names it in the one-line error."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            return _read_members(archive, max_input_bytes())
    except NebisectError as exc:
        raise NebisectError(f"{label}: {exc}") from None
    except (ValueError, zipfile.BadZipFile) as exc:
        raise NebisectError(f"{label}: not a plain numeric .npz ({exc})") from None


def _read_members(archive: zipfile.ZipFile, limit: int) -> dict[str, np.ndarray]:
    """Every member as an array, each checked by its header before its data is read:
    an npy array of a non-object dtype, all of them together within ``limit`` bytes."""
    arrays: dict[str, np.ndarray] = {}
    total = 0
    for info in archive.infolist():
        name = info.filename.removesuffix(".npy")
        if not info.filename.endswith(".npy"):
            raise NebisectError(f"member {info.filename!r} is not an .npy array")
        with cast(zipfile.ZipExtFile, archive.open(info)) as member:
            shape, fortran, dtype = _npy_header(name, member)
            size = math.prod(shape) * dtype.itemsize
            total += size
            if total > limit:
                amount = (f"is {_size(size)}" if total == size
                          else f"takes the arrays to {_size(total)}")
                raise NebisectError(
                    f"member {name!r} ({dtype} {list(shape)}) {amount}, over the "
                    f"{_size(limit)} input limit (set {MAX_INPUT_BYTES_VAR} to raise it)"
                )
            data = bytearray(size)
            view = memoryview(data)
            while view:
                count = member.readinto(view)
                if not count:
                    raise NebisectError(f"member {name!r} is truncated ({size} bytes declared)")
                view = view[count:]
        flat = np.frombuffer(data, dtype=dtype)
        arrays[name] = flat.reshape(shape, order="F" if fortran else "C")
    return arrays


def _npy_header(name: str, member: Any) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    """(shape, Fortran order, dtype) from an npy header; no object dtype (no pickle)."""
    version = npformat.read_magic(member)
    if version == (1, 0):
        shape, fortran, dtype = npformat.read_array_header_1_0(member)
    elif version == (2, 0):
        shape, fortran, dtype = npformat.read_array_header_2_0(member)
    else:
        raise NebisectError(f"member {name!r} has npy format {version}, expected 1.0 or 2.0")
    if dtype.hasobject:
        raise NebisectError(f"member {name!r} is not a plain numeric array: it holds "
                            f"Python objects ({dtype}), and pickles are never loaded")
    return shape, fortran, dtype


def _size(count: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"

"""Atomic text writes: a CI job that reads a report never sees half a file."""

from __future__ import annotations

import os
from pathlib import Path

from nebisect.case import NebisectError


def output_directory(path: str | os.PathLike[str], option: str) -> Path:
    """An output directory option (``--report``, ``--out``), created now.

    Commands call this (or :func:`output_file`) before their long work starts: a typo
    in an output path is a one-line error at once, not a traceback after the run.
    """
    directory = Path(path)
    if directory.exists() and not directory.is_dir():
        raise NebisectError(f"{option} {directory}: exists and is not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NebisectError(f"{option} {directory}: cannot create it ({exc.strerror})") from exc
    return directory


def output_file(path: str | os.PathLike[str], option: str) -> Path:
    """An output file option (``--junit``, ``--output``): its directory exists, it is no
    directory itself."""
    file = Path(path)
    if file.is_dir():
        raise NebisectError(f"{option} {file}: is a directory")
    output_directory(file.parent, option)
    return file


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` via a temp file and rename; parents are created."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)
    return target

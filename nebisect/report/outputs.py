"""Output path options (``--report``, ``--out``, ``--output``, ``--junit``), checked early.

Kept apart from :mod:`nebisect.report` so that a command checking its output path does not
import the report renderers at start-up.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from nebisect.errors import NebisectError


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
    """An output file option (``--junit``, ``--output``): its directory exists and takes
    new files (outputs are written to a temp file there and renamed over the path), and
    the path is absent or a regular file (a rename over ``/dev/null`` would replace it)."""
    file = Path(path)
    if file.is_dir():
        raise NebisectError(f"{option} {file}: is a directory")
    output_directory(file.parent, option)
    if file.exists() and not file.is_file():
        raise NebisectError(f"{option} {file}: not a regular file")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{file.name}.", suffix=".probe", dir=file.parent)
    except OSError as exc:
        raise NebisectError(f"{option} {file}: cannot write it ({exc.strerror})") from exc
    os.close(fd)
    os.unlink(probe)
    return file


def fresh_output_directory(path: str | os.PathLike[str], option: str, *, force: bool,
                           inputs: Sequence[tuple[str, Path]]) -> Path:
    """An output directory a command fills with a set of files (``bisect --out``).

    Refused when it holds, or lies inside, one of the command's ``inputs`` (option name,
    path) — even with ``force``: the command would write over what it reads — and,
    without ``force``, when it is not empty: old files would pass for this run's.
    """
    directory = Path(path)
    where = directory.resolve()
    for name, item in inputs:
        held = item.resolve()
        if where == held or where in held.parents or held in where.parents:
            raise NebisectError(f"{option} {directory}: overlaps {name} {item}, which it "
                                f"would overwrite; choose another {option}")
    if not force and directory.is_dir() and any(directory.iterdir()):
        raise NebisectError(f"{option} {directory}: is not empty (--force writes into it, "
                            "replacing the files of the same names)")
    return output_directory(directory, option)

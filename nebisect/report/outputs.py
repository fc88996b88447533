"""Output path options (``--report``, ``--out``, ``--output``, ``--junit``), checked early.

An output never writes over an input: one that is, or lies inside, what the command
reads (its source, ``--inputs``, the corpus) is refused, ``--force`` or not; an output
file or package that exists is replaced only with ``--force``.

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


def output_file(path: str | os.PathLike[str], option: str, *, force: bool,
                inputs: Sequence[tuple[str, Path]] = ()) -> Path:
    """An output file option (``--junit``, ``--output``): apart from the command's
    ``inputs`` (:func:`apart_from_inputs`), new unless ``force``, its directory exists
    and takes new files (outputs are written to a temp file there and renamed over the
    path), and the path is absent or a regular file (a rename over ``/dev/null`` would
    replace it)."""
    file = Path(path)
    if file.is_dir():
        raise NebisectError(f"{option} {file}: is a directory")
    apart_from_inputs(file, option, inputs)
    output_directory(file.parent, option)
    if file.exists() and not file.is_file():
        raise NebisectError(f"{option} {file}: not a regular file")
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{file.name}.", suffix=".probe", dir=file.parent)
    except OSError as exc:
        raise NebisectError(f"{option} {file}: cannot write it ({exc.strerror})") from exc
    os.close(fd)
    os.unlink(probe)
    _new_unless_forced(file, option, force)
    return file


def output_package(path: str | os.PathLike[str], option: str, *, force: bool,
                   inputs: Sequence[tuple[str, Path]]) -> Path:
    """An ``.mlpackage`` output (``fix apply --output``), replaced as a whole: apart from
    the command's ``inputs``, neither holding one nor inside one, and new unless
    ``force``; its directory is created."""
    package = Path(path)
    if package.suffix != ".mlpackage":
        raise NebisectError(f"{option} {package}: the output must end in .mlpackage")
    apart_from_inputs(package, option, inputs, holding=True)
    _new_unless_forced(package, option, force)
    output_directory(package.parent, option)
    return package


def fresh_output_directory(path: str | os.PathLike[str], option: str, *, force: bool,
                           inputs: Sequence[tuple[str, Path]]) -> Path:
    """An output directory a command fills with a set of files (``bisect --out``).

    Refused when it holds, or lies inside, one of the command's ``inputs`` — even with
    ``force``: the command would write over what it reads — and, without ``force``,
    when it is not empty: old files would pass for this run's.
    """
    directory = Path(path)
    apart_from_inputs(directory, option, inputs, holding=True)
    if not force and directory.is_dir() and any(directory.iterdir()):
        raise NebisectError(f"{option} {directory}: is not empty (--force writes into it, "
                            "replacing the files of the same names)")
    return output_directory(directory, option)


def apart_from_inputs(path: Path, option: str, inputs: Sequence[tuple[str, Path]], *,
                      holding: bool = False) -> None:
    """Refuse an output ``path`` that is one of the command's ``inputs`` (what it
    reads: description and path) or lies inside one, and with ``holding`` also one that
    holds an input (an output replaced or filled as a whole) — ``--force`` or not."""
    where = path.resolve()
    for name, item in inputs:
        held = item.resolve()
        if where == held or held in where.parents or (holding and where in held.parents):
            raise NebisectError(f"{option} {path}: overlaps {name} {item}, which it "
                                f"would overwrite; choose another {option}")


def _new_unless_forced(path: Path, option: str, force: bool) -> None:
    if not force and (path.exists() or path.is_symlink()):
        raise NebisectError(f"{option} {path}: exists (--force replaces it)")

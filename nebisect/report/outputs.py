"""Output path options (``--report``, ``--out``, ``--output``, ``--junit``), checked early.

An output never writes over an input: one that is, or lies inside, what the command
reads (its source, ``--inputs``, the corpus) is refused, ``--force`` or not; an output
file or package that exists is replaced only with ``--force``.

Kept apart from :mod:`nebisect.report` so that a command checking its output path does not
import the report renderers at start-up.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from nebisect.errors import NebisectError

#: The directories :func:`output_directory` created, one list per
#: :func:`removed_if_unused` block watching them (innermost last).
_created: list[list[Path]] = []


@contextlib.contextmanager
def removed_if_unused() -> Iterator[None]:
    """Undo the output directories created in the block, if it fails before using them.

    A command creates its output directories early (:func:`output_directory`), so that a
    bad path fails at once; a command that then ends in an error (bad input found later,
    nothing to bisect, a full disk) must not leave them behind empty. On any exception
    but an exit with a result (status 0 or 1), each directory the block created, and
    each parent created for it, is removed again if it is still empty. The CLI runs
    every command in one.
    """
    created: list[Path] = []
    _created.append(created)
    try:
        yield
    except SystemExit as stop:
        if stop.code not in (None, 0, 1):
            _remove_empty(created)
        raise
    except BaseException:
        _remove_empty(created)
        raise
    finally:
        _created.remove(created)


def _remove_empty(directories: list[Path]) -> None:
    """Remove those of ``directories`` that are empty, deepest first (a parent emptied by
    removing its child goes too); one that holds anything stays."""
    for directory in sorted(set(directories), key=lambda d: len(d.parts), reverse=True):
        with contextlib.suppress(OSError):
            directory.rmdir()


def _missing(directory: Path) -> list[Path]:
    """``directory`` and its ancestors up to the first that exists: what creating it with
    its parents creates."""
    missing = []
    for candidate in (directory.absolute(), *directory.absolute().parents):
        if candidate.exists() or candidate.is_symlink():
            break
        missing.append(candidate)
    return missing


def output_directory(path: str | os.PathLike[str], option: str) -> Path:
    """An output directory option (``--report``, ``--out``), created now (and removed
    again if the command fails before using it: :func:`removed_if_unused`).

    Commands call this (or :func:`output_file`) before their long work starts: a typo
    in an output path is a one-line error at once, not a traceback after the run.
    """
    directory = Path(path)
    if directory.exists() and not directory.is_dir():
        raise NebisectError(f"{option} {directory}: exists and is not a directory")
    if _created:
        _created[-1].extend(_missing(directory))
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NebisectError(f"{option} {directory}: cannot create it ({exc.strerror})") from exc
    return directory


def output_file(path: str | os.PathLike[str], option: str, *, force: bool,
                inputs: Sequence[tuple[str, Path]] = (), create: bool = True) -> Path:
    """An output file option (``--junit``, ``--output``): apart from the command's
    ``inputs`` (:func:`apart_from_inputs`), new unless ``force``, its directory exists
    (created unless ``create`` is False: then a missing one is an error) and takes new
    files (outputs are written to a temp file there and renamed over the path), and the
    path is absent or a regular file (a rename over ``/dev/null`` would replace it)."""
    file = Path(path)
    if file.is_dir():
        raise NebisectError(f"{option} {file}: is a directory")
    apart_from_inputs(file, option, inputs)
    if not create and not file.parent.is_dir():
        raise NebisectError(f"{option} {file}: no directory {file.parent}")
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

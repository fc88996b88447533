"""The on-disk corpus: verified loads, atomic adds, and a lock for concurrent writers.

Layout (DESIGN.md §9)::

    corpus/
      .lock                     fcntl lock file (writers serialize on it)
      <case id>/                one directory per case, named by its content address
        case.json               the record (see :mod:`nebisect.corpus.record`)
        model.mlpackage | model.py
        inputs.npz
        plugins/*.py            target plugins the case needs (optional)

A writer builds the whole case in ``.tmp-<random>/`` inside the corpus root (same file
system), holding an flock on that directory, fsyncs every file, then — holding the
corpus lock — renames it into place. Readers never lock: a case directory either does
not exist yet or is complete. Removal renames to ``.trash-…`` under the lock before
deleting, for the same reason. A ``.tmp-`` directory whose flock is free outlived its
writer: it is reported, ignored, and removed by :meth:`Corpus.collect_garbage`. Both are
named ``.tmp-``/``.trash-`` and 32 hex digits: only such a directory is nebisect's own, so
a user's ``.tmp-notes`` in the root is never reported or removed.

A directory is a corpus when it holds the ``.lock`` file (created with the corpus) or a
case directory (one holding its own ``case.json``), and is no case itself. ``rm`` and
``gc`` refuse any other root, and ``rm`` removes only case directories: whatever else lies
in a directory given by mistake (a home folder, a case, a package) is never touched, and
no ``.lock`` is left in it.

A corpus arrives in pull requests, so it is untrusted (SECURITY.md). A verified case is
*exactly* its listed, hashed, regular files: an unlisted file, a symlink anywhere, a
FIFO or device, a path or plugin outside the case, a package whose manifest names a
path outside it, or an id that does not match the content makes it damaged. Replay never runs a case in place: :meth:`CorpusCase.private_copy`
copies the listed files alone to a private directory and verifies the copy, so nothing
else is importable or readable next to the model, whatever changes in the corpus
meanwhile. ``add`` copies regular files only and refuses a source holding a symlink.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import re
import shutil
import stat
import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

import numpy as np

from nebisect.arrays import save_npz, sha256_arrays, sha256_path
from nebisect.case import SOURCE_KINDS, Case, CaseOptions, SourceRef, torch_form
from nebisect.targets.spec import REFERENCE_TARGET
from nebisect.corpus.record import (
    CASE_FILE,
    INPUTS_FILE,
    PLUGIN_DIR,
    SAVED_MODEL_FILES,
    CaseRecord,
    CorruptCaseError,
    Expected,
)
from nebisect.errors import NebisectError
from nebisect.files import WriteError, fsync_directory, walk, write_text
from nebisect.isolation.provenance import provenance
from nebisect.isolation.timeouts import DEFAULT_TIMEOUTS
from nebisect.package import MANIFEST, PackageError, check_package
from nebisect.targets.plugins import use_plugins
from nebisect.verdict import Stage, Verdict

LOCK_FILE = ".lock"
MAX_RECORD_BYTES = 1 << 20
TMP_PREFIX = ".tmp-"
TRASH_PREFIX = ".trash-"
#: The name of a staging (``.tmp-``) or removal (``.trash-``) directory nebisect made.
OWN_ENTRY = re.compile(rf"({re.escape(TMP_PREFIX)}|{re.escape(TRASH_PREFIX)})[0-9a-f]{{32}}")


@dataclass
class CorpusCase:
    """A verified case directory."""

    record: CaseRecord
    path: Path

    @property
    def case_id(self) -> str:
        return self.record.case_id

    @property
    def model_path(self) -> Path:
        return self.path / self.record.model_file

    @property
    def source(self) -> str:
        """The source string a runner takes: the package or saved program's path, or
        ``model.py:factory``."""
        if self.record.source_kind == "torch" and self.record.factory:
            return f"{self.model_path}:{self.record.factory}"
        return str(self.model_path)

    def to_case(self) -> Case:
        """The runnable case; its plugins are the case's own files, by absolute path,
        described in an isolated child, never imported here (the case's child imports them)."""
        options = self.record.options
        if self.record.plugins:
            options = replace(options, plugins=tuple(str(self.path / name)
                                                     for name in self.record.plugins))
            use_plugins(list(options.plugins), timeout=DEFAULT_TIMEOUTS.load)
        return Case(
            ref=SourceRef(self.record.source_kind, self.source, self.record.function),
            target=self.record.target,
            stage=self.record.stage,
            inputs_path=str(self.path / INPUTS_FILE),
            model_sha256=self.record.files[self.record.model_file],
            inputs_sha256=self.record.inputs_sha256,
            options=options,
        )

    def private_copy(self, parent: Path) -> CorpusCase:
        """The case's listed files alone, copied under ``parent`` and verified there.

        What runs is what was hashed: the copy is checked like any case, so a file
        added, swapped or symlinked in the corpus after the scan is never seen.
        """
        parent.mkdir(parents=True, exist_ok=True)
        destination = Path(tempfile.mkdtemp(prefix="case-", dir=parent)) / self.case_id
        destination.mkdir()
        (destination / CASE_FILE).write_text(self.record.to_json())
        for name in self.record.files:
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            _copy_regular(self.path / name, destination / name, CorruptCaseError)
        return load_case(destination)


@dataclass
class Problem:
    """A directory in the corpus that is not a usable case, and why.

    ``damaged`` is True for a case directory that fails verification (a guard that no
    longer runs), False for a writer's in-flight or abandoned ``.tmp-`` directory.
    """

    path: Path
    reason: str
    damaged: bool = True

    def __str__(self) -> str:
        return f"{self.path.name}: {self.reason}"


@dataclass
class Scan:
    """Every usable case, and every problem found on the way (skipped, not fatal)."""

    cases: list[CorpusCase] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


@dataclass
class NewCase:
    """What a caller (``corpus add``, the fuzzer, ``replay --update``) stores.

    ``provenance`` (e.g. the recording verdict's stamp, or where a fuzz finding came
    from) is laid over the store's own stamp of tool versions and machine.
    ``source_kind`` ``builder`` is materialized to an ``.mlpackage`` (``options.params``
    are the builder's keyword arguments): the corpus keeps model *bytes*, so a later
    change to the builder code cannot change what a stored case means. ``function``:
    the function of a multifunction package the case judges (the package is stored
    whole).
    """

    source_kind: str
    source: str
    target: str
    inputs: dict[str, np.ndarray]
    expected: Expected | None = None
    stage: Stage = Stage.PREDICT
    options: CaseOptions = field(default_factory=CaseOptions)
    reference: str = ""
    name: str = ""
    description: str = ""
    fixes: list[str] = field(default_factory=list)
    provenance: dict[str, str] = field(default_factory=dict)
    function: str = ""


#: Evaluates a staged case; its verdict becomes the expectation (``corpus add`` without
#: ``--expect``).
Recorder = Callable[[CorpusCase], Verdict]


@dataclass
class Added:
    case: CorpusCase
    created: bool
    replaced: str = ""


class Corpus:
    """A corpus directory; every method is safe against concurrent writers."""

    def __init__(self, root: str | os.PathLike[str], *, create: bool = False) -> None:
        self.root = Path(root)
        if create:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise NebisectError(
                    f"{self.root}: cannot create the corpus directory ({exc.strerror})"
                ) from exc
        if not self.root.is_dir():
            raise NebisectError(f"{self.root}: no such corpus directory")
        if create:
            os.close(os.open(self.root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644))

    def check_is_corpus(self) -> None:
        """Raise unless the root is a corpus (see the module's docstring): what deletes
        in it calls this before it locks or removes anything."""
        if _is_regular(self.root / CASE_FILE):
            raise NebisectError(f"{self.root}: a case directory, not a corpus (give the "
                                "directory that holds the cases)")
        if not _is_regular(self.root / LOCK_FILE) and not any(
                _is_case_directory(entry) for entry in self.root.iterdir()):
            raise NebisectError(f"{self.root}: not a corpus (no {LOCK_FILE} and no case "
                                f"directory holding a {CASE_FILE})")

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Exclusive writer lock (fcntl; released by the kernel if the writer dies)."""
        fd = os.open(self.root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def scan(self) -> Scan:
        """Load and verify every case; damaged or unfinished ones become problems."""
        scan = Scan()
        for entry in sorted(self.root.iterdir()):
            if _is_own(entry, TMP_PREFIX):
                reason = ("write in progress; ignored" if _in_use(entry) else
                          "unfinished write whose writer is gone; ignored "
                          "(`nebisect corpus gc` removes it)")
                scan.problems.append(Problem(entry, reason, damaged=False))
            elif entry.is_symlink():
                scan.problems.append(Problem(entry, "a symlink, not a case directory"))
            elif entry.name.startswith(".") or not entry.is_dir():
                continue
            else:
                try:
                    scan.cases.append(load_case(entry))
                except CorruptCaseError as exc:
                    scan.problems.append(Problem(entry, str(exc)))
        return scan

    def find(self, key: str) -> CorpusCase:
        """The verified case :meth:`locate` finds for ``key``."""
        path = self.locate(key)
        try:
            return load_case(path)
        except CorruptCaseError as exc:
            raise NebisectError(f"{path}: {exc}") from None

    def locate(self, key: str) -> Path:
        """The case directory ``key`` names: the entry directly under the root whose name
        is ``key`` or, unambiguously, starts with it (a case id or its prefix; a damaged
        case by its directory name), else the verified case whose name is ``key``.

        A key is never joined to the root as a path, so an absolute path, a ``..`` or the
        root itself names no case; what it resolves to must be a case directory (holding
        its own ``case.json``) directly under the root, not a symlink.
        """
        if key.startswith("."):
            raise NebisectError(f"{self.root}: {key!r} is not a case; `nebisect corpus gc` "
                                "removes what interrupted writers left")
        if not key:
            raise NebisectError(f"{self.root}: an empty key names no case")
        entries = [e for e in sorted(self.root.iterdir())
                   if not e.name.startswith(".") and (e.is_symlink() or _is_case_directory(e))]
        matches = ([e for e in entries if e.name == key]
                   or [e for e in entries if e.name.startswith(key)]
                   or [c.path for c in self.scan().cases if c.record.name == key])
        if not matches:
            if any(e.name == key for e in self.root.iterdir()):
                raise NebisectError(f"{self.root / key}: not a case directory (no {CASE_FILE} "
                                    "of its own)")
            raise NebisectError(f"{self.root}: no case {key!r}")
        if len(matches) > 1:
            raise NebisectError(f"{self.root}: {key!r} is ambiguous "
                                f"({', '.join(m.name for m in matches[:5])})")
        path = matches[0]
        if path.parent != self.root or not stat.S_ISDIR(path.lstat().st_mode):
            raise NebisectError(f"{path}: a symlink, not a case directory of {self.root}")
        return path

    def add(self, new: NewCase, recorder: Recorder | None = None) -> Added:
        """Store a case atomically; an intact identical case is kept, not duplicated.

        Without ``new.expected``, ``recorder`` evaluates the staged case — the exact
        bytes about to be stored — and its verdict becomes the expectation.
        """
        if new.expected is None and recorder is None:
            raise NebisectError("a new case needs an expected status or a run to record one")
        staging = self.root / f"{TMP_PREFIX}{uuid.uuid4().hex}"
        with self.lock():  # gc, under the same lock, never sees it unlocked
            staging.mkdir()
            in_use = os.open(staging, os.O_RDONLY)
            fcntl.flock(in_use, fcntl.LOCK_EX)
        try:
            record = _materialize(new, staging)
            if new.expected is None and recorder is not None:
                verdict = recorder(CorpusCase(record, staging))
                record.expected = Expected.from_verdict(verdict)
                record.provenance = {**record.provenance, **verdict.provenance}
            write_text(staging / CASE_FILE, record.to_json())
            _fsync_tree(staging)
            final = self.root / record.case_id
            with self.lock():
                replaced = ""
                if final.exists():
                    try:
                        return Added(load_case(final), created=False)
                    except CorruptCaseError as exc:
                        replaced = str(exc)
                        self._discard(final)
                os.rename(staging, final)
                fsync_directory(self.root)
            return Added(load_case(final), created=True, replaced=replaced)
        except WriteError as exc:
            # A write into the staged case (a full disk) names the corpus: the staging
            # directory is gone by the time the line is read.
            if not exc.path.is_relative_to(staging):
                raise
            raise WriteError(self.root, exc.reason) from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            os.close(in_use)

    def remove(self, key: str) -> str:
        """Delete the case directory :meth:`locate` finds for ``key``.

        A writer's ``.tmp-`` directory is not a case: :meth:`collect_garbage` decides
        whether its writer is gone.
        """
        self.check_is_corpus()
        target = self.locate(key)
        with self.lock():
            self._discard(target)
        return target.name

    def garbage(self) -> list[Path]:
        """What interrupted writers and removers left: nebisect's own ``.tmp-`` directories
        whose writer is gone (its flock is free) and ``.trash-`` directories."""
        self.check_is_corpus()
        return [entry for entry in sorted(self.root.iterdir())
                if _is_own(entry, TRASH_PREFIX)
                or (_is_own(entry, TMP_PREFIX) and not _in_use(entry))]

    def collect_garbage(self) -> list[Path]:
        """Remove :meth:`garbage` (re-checked under the lock); the paths removed."""
        self.check_is_corpus()
        removed = []
        with self.lock():
            for entry in self.garbage():
                if entry.name.startswith(TMP_PREFIX):
                    self._discard(entry)
                else:
                    _delete(entry)
                removed.append(entry)
        return removed

    def update_expected(self, case: CorpusCase, expected: Expected) -> CorpusCase:
        """Re-record a case's expectation (``replay --update``), atomically, under the lock."""
        with self.lock():
            current = load_case(case.path)
            current.record.expected = expected
            write_text(case.path / CASE_FILE, current.record.to_json(), durable=True)
        return load_case(case.path)

    def _discard(self, path: Path) -> None:
        """Rename an entry of the root to ``.trash-…``, then delete it (:func:`_delete`)."""
        trash = self.root / f"{TRASH_PREFIX}{uuid.uuid4().hex}"
        os.rename(path, trash)
        fsync_directory(self.root)
        _delete(trash)


def _is_own(entry: Path, prefix: str) -> bool:
    """True for a real directory (not a symlink) named like nebisect's own ``prefix``
    entries."""
    if not entry.name.startswith(prefix) or OWN_ENTRY.fullmatch(entry.name) is None:
        return False
    try:
        return stat.S_ISDIR(entry.lstat().st_mode)
    except OSError:
        return False


def _is_regular(path: Path) -> bool:
    """True for a regular file (a symlink is not followed)."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def _is_case_directory(entry: Path) -> bool:
    """True for a directory (not a symlink) holding its own ``case.json``: a case, intact
    or damaged."""
    try:
        return stat.S_ISDIR(entry.lstat().st_mode) and _is_regular(entry / CASE_FILE)
    except OSError:
        return False


def _delete(path: Path) -> None:
    """Delete a directory with everything below it, or unlink anything else: a symlink
    is removed itself, never followed."""
    if stat.S_ISDIR(path.lstat().st_mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def load_case(path: Path) -> CorpusCase:
    """Read and verify one case directory (raises :class:`CorruptCaseError`)."""
    if path.is_symlink():
        raise CorruptCaseError("a symlink, not a case directory")
    try:
        fd = os.open(path / CASE_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise CorruptCaseError(f"no {CASE_FILE} (half-written or not a case)") from None
    except OSError as exc:
        raise CorruptCaseError(f"{CASE_FILE} unreadable ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CorruptCaseError(f"{CASE_FILE} is not a regular file")
        data = handle.read(MAX_RECORD_BYTES + 1)
    if len(data) > MAX_RECORD_BYTES:
        raise CorruptCaseError(f"{CASE_FILE} is larger than {MAX_RECORD_BYTES} bytes")
    try:
        text = data.decode()
    except UnicodeDecodeError as exc:
        raise CorruptCaseError(f"{CASE_FILE} unreadable ({exc})") from None
    record = CaseRecord.from_json(text)
    if record.case_id != path.name:
        raise CorruptCaseError(f"directory name does not match case id {record.case_id}")
    _check_contents(path, record)
    for name, digest in sorted(record.files.items()):
        if sha256_path(path / name) != digest:
            raise CorruptCaseError(f"{name} does not match its sha256 (tampered or truncated)")
    if record.source_kind == "mlpackage":
        try:
            check_package(path / record.model_file, record.model_file)
        except PackageError as exc:
            raise CorruptCaseError(str(exc)) from None
    if record.identity() != record.case_id:
        raise CorruptCaseError(f"case id {record.case_id} does not match the case's content "
                               f"({record.identity()})")
    return CorpusCase(record, path)


def _check_contents(path: Path, record: CaseRecord) -> None:
    """The directory holds exactly ``case.json`` and the listed files: regular files (and
    the folders of a listed package or plugin), no symlink, nothing else."""
    listed = {CASE_FILE, *record.files}
    folders = {parent.as_posix() for name in listed for parent in PurePosixPath(name).parents}
    trees = {record.model_file} if record.source_kind == "mlpackage" else set()
    seen = set()
    for entry, mode in walk(path):
        name = entry.relative_to(path).as_posix()
        inside = any(name.startswith(f"{tree}/") for tree in trees)
        if stat.S_ISLNK(mode):
            raise CorruptCaseError(f"{name} is a symlink (a case holds regular files only)")
        if stat.S_ISDIR(mode):
            if name not in folders and name not in trees and not inside:
                raise CorruptCaseError(f"{name}/ is not listed in {CASE_FILE}")
        elif not stat.S_ISREG(mode):
            raise CorruptCaseError(f"{name} is not a regular file")
        elif name not in listed and not inside:
            raise CorruptCaseError(f"{name} is not listed in {CASE_FILE} (an unlisted file "
                                   "never runs; remove it)")
        seen.add(name)
    missing = sorted(listed - seen)
    if missing:
        raise CorruptCaseError(f"{missing[0]} is missing")


def _copy_regular(source: Path, destination: Path, error: type[NebisectError]) -> None:
    """Copy a regular file or a folder of regular files; a symlink, FIFO or device inside
    raises ``error`` (never followed, never read)."""
    mode = source.lstat().st_mode
    if stat.S_ISREG(mode):
        shutil.copyfile(source, destination)
        return
    if not stat.S_ISDIR(mode):
        raise error(f"{source}: {_kind(mode)}; a corpus case holds regular files only")
    destination.mkdir()
    for entry, mode in walk(source):
        target = destination / entry.relative_to(source)
        if stat.S_ISDIR(mode):
            target.mkdir()
        elif stat.S_ISREG(mode):
            shutil.copyfile(entry, target)
        else:
            raise error(f"{entry}: {_kind(mode)}; a corpus case holds regular files only")


def _kind(mode: int) -> str:
    return "a symlink" if stat.S_ISLNK(mode) else "not a regular file"


def _in_use(staging: Path) -> bool:
    """True while a writer holds the flock on its staging directory."""
    try:
        fd = os.open(staging, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _materialize(new: NewCase, staging: Path) -> CaseRecord:
    """Write the model and inputs into ``staging`` and build the record (not yet saved)."""
    if new.source_kind not in SOURCE_KINDS:
        raise NebisectError(f"unknown source kind {new.source_kind!r}: one of "
                            f"{', '.join(SOURCE_KINDS)}")
    if new.function and new.source_kind != "mlpackage":
        raise NebisectError(f"{new.source}: --function {new.function} names a function of "
                            "a multifunction .mlpackage")
    options = replace(new.options, params={})
    if options.plugins:
        options = replace(options, plugins=tuple(_store_plugins(list(options.plugins), staging)))
    stamp = {**{k: v for k, v in provenance("").items() if v}, **new.provenance}
    kind, factory = _store_model(new, staging, stamp)
    record = CaseRecord(
        case_id="",
        source_kind=kind,
        target=new.target,
        stage=new.stage,
        factory=factory,
        function=new.function,
        reference=new.reference or ("torch:cpu:fp64" if kind == "torch" else REFERENCE_TARGET),
        expected=new.expected or Expected("pass"),
        options=options,
        name=new.name,
        description=new.description,
        fixes=list(new.fixes),
        provenance=stamp,
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    )
    save_npz(staging / INPUTS_FILE, new.inputs)
    record.inputs_sha256 = sha256_arrays(new.inputs)
    names = [record.model_file, INPUTS_FILE, *record.plugins]
    record.files = {name: sha256_path(staging / name) for name in names}
    record.case_id = record.identity()
    return record


def _store_plugins(plugins: list[str], staging: Path) -> list[str]:
    """Copy plugin files into the case; their names in the case, in order.

    A case runs only its own files, so a plugin given as a module name (which would be
    found on whatever ``sys.path`` replay has) cannot be stored.
    """
    names = []
    (staging / PLUGIN_DIR).mkdir()
    for plugin in plugins:
        source = Path(plugin)
        if source.suffix != ".py":
            raise NebisectError(f"plugin {plugin}: a corpus case keeps its plugins as files; "
                                "give the path of the .py file")
        name = f"{PLUGIN_DIR}/{source.name}"
        if name in names:
            raise NebisectError(f"plugin {plugin}: two plugins named {source.name}")
        if not source.exists():
            raise NebisectError(f"plugin {plugin}: no such Python file")
        _copy_regular(source.resolve(), staging / name, NebisectError)
        names.append(name)
    return names


def _store_model(new: NewCase, staging: Path, stamp: dict[str, str]) -> tuple[str, str]:
    """Copy (or build) the model into ``staging``; the stored kind and torch factory."""
    if new.source_kind == "torch" and torch_form(new.source) in SAVED_MODEL_FILES:
        saved = Path(new.source)
        if not saved.is_file():
            raise NebisectError(f"{saved}: no such file")
        _copy_regular(saved.resolve(), staging / SAVED_MODEL_FILES[torch_form(new.source)],
                      NebisectError)
        return "torch", ""
    if new.source_kind == "torch":
        from nebisect.sources.torch_module import parse_location

        path, factory = parse_location(new.source)
        if not path.is_file():
            raise NebisectError(f"{path}: no such file")
        _copy_regular(path.resolve(), staging / "model.py", NebisectError)
        return "torch", factory
    destination = staging / "model.mlpackage"
    if new.source_kind == "mlpackage":
        source = Path(new.source)
        if not (source / MANIFEST).is_file():
            raise NebisectError(f"{source}: not an .mlpackage (no {MANIFEST})")
        check_package(source)
        _copy_regular(source.resolve(), destination, NebisectError)
        return "mlpackage", ""
    from nebisect.mil.load import save_program
    from nebisect.sources.artifact import Artifact

    params = new.options.params
    save_program(Artifact("builder", new.source, params).program, destination)
    stamp["built_from"] = f"{new.source} {params}"
    return "mlpackage", ""


def _fsync_tree(root: Path) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        if path.is_file():
            with open(path, "rb") as handle:
                os.fsync(handle.fileno())
        else:
            fsync_directory(path)
    fsync_directory(root)

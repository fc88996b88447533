"""The on-disk corpus: verified loads, atomic adds, and a lock for concurrent writers.

Layout (DESIGN.md §9)::

    corpus/
      .lock                     fcntl lock file (writers serialize on it)
      <case id>/                one directory per case, named by its content address
        case.json               the record (see :mod:`nebisect.corpus.record`)
        model.mlpackage | model.py
        inputs.npz

A writer builds the whole case in ``.tmp-<random>/`` inside the corpus root (same file
system), fsyncs every file, then — holding the lock — renames it into place. Readers
never lock: a case directory either does not exist yet or is complete. Removal renames
to ``.trash-…`` under the lock before deleting, for the same reason. A ``.tmp-``
directory that outlives its writer is reported and ignored.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.case import Case, NebisectError, save_npz, sha256_arrays, sha256_path
from nebisect.corpus.record import (
    CASE_FILE,
    INPUTS_FILE,
    CaseRecord,
    CorruptCaseError,
    Expected,
)
from nebisect.files import fsync_directory, write_text
from nebisect.provenance import provenance
from nebisect.targets import load_plugins
from nebisect.verdict import Verdict

LOCK_FILE = ".lock"
TMP_PREFIX = ".tmp-"
TRASH_PREFIX = ".trash-"
SOURCE_KINDS = ("mlpackage", "builder", "torch")


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
        """The source string a runner takes: the package path or ``model.py:factory``."""
        if self.record.source_kind == "torch":
            return f"{self.model_path}:{self.record.factory}"
        return str(self.model_path)

    def to_case(self) -> Case:
        load_plugins(self.record.options.get("plugins", ()))
        return Case(
            source=self.source,
            source_kind=self.record.source_kind,
            target=self.record.target,
            stage=self.record.stage,
            inputs_path=str(self.path / INPUTS_FILE),
            model_sha256=self.record.files[self.record.model_file],
            inputs_sha256=self.record.inputs_sha256,
            options=dict(self.record.options),
        )


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
    ``source_kind`` ``builder`` is materialized to an ``.mlpackage`` (``options["params"]``
    are the builder's keyword arguments): the corpus keeps model *bytes*, so a later
    change to the builder code cannot change what a stored case means.
    """

    source_kind: str
    source: str
    target: str
    inputs: dict[str, np.ndarray]
    expected: Expected | None = None
    stage: str = "predict"
    options: dict[str, Any] = field(default_factory=dict)
    reference: str = ""
    name: str = ""
    description: str = ""
    fixes: list[str] = field(default_factory=list)
    provenance: dict[str, str] = field(default_factory=dict)


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
            if entry.name.startswith(TMP_PREFIX):
                scan.problems.append(Problem(
                    entry, "unfinished write (in progress, or its writer was interrupted); "
                    "ignored", damaged=False))
            elif entry.name.startswith(".") or not entry.is_dir():
                continue
            else:
                try:
                    scan.cases.append(load_case(entry))
                except CorruptCaseError as exc:
                    scan.problems.append(Problem(entry, str(exc)))
        return scan

    def find(self, key: str) -> CorpusCase:
        """The case whose id starts with ``key`` or whose name is ``key``."""
        matches = [d for d in self._case_dirs() if d.name.startswith(key)]
        if not matches:
            matches = [c.path for c in self.scan().cases if c.record.name == key]
        if not matches:
            raise NebisectError(f"{self.root}: no case {key!r}")
        if len(matches) > 1:
            raise NebisectError(f"{self.root}: {key!r} is ambiguous "
                                f"({', '.join(m.name for m in matches[:5])})")
        try:
            return load_case(matches[0])
        except CorruptCaseError as exc:
            raise NebisectError(f"{matches[0]}: {exc}") from None

    def add(self, new: NewCase, recorder: Recorder | None = None) -> Added:
        """Store a case atomically; an intact identical case is kept, not duplicated.

        Without ``new.expected``, ``recorder`` evaluates the staged case — the exact
        bytes about to be stored — and its verdict becomes the expectation.
        """
        if new.expected is None and recorder is None:
            raise NebisectError("a new case needs an expected status or a run to record one")
        staging = self.root / f"{TMP_PREFIX}{uuid.uuid4().hex}"
        staging.mkdir()
        try:
            record = _materialize(new, staging)
            if new.expected is None and recorder is not None:
                verdict = recorder(CorpusCase(record, staging))
                record.expected = Expected.from_verdict(verdict)
                record.provenance = {**record.provenance, **verdict.provenance}
            (staging / CASE_FILE).write_text(record.to_json())
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
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def remove(self, key: str) -> str:
        """Delete a case (by id prefix or name; a damaged case by its directory name)."""
        exact = self.root / key
        target = exact if exact.is_dir() and not key.startswith(".") else self.find(key).path
        with self.lock():
            self._discard(target)
        return target.name

    def update_expected(self, case: CorpusCase, expected: Expected) -> CorpusCase:
        """Re-record a case's expectation (``replay --update``), atomically, under the lock."""
        with self.lock():
            current = load_case(case.path)
            current.record.expected = expected
            write_text(case.path / CASE_FILE, current.record.to_json(), durable=True)
        return load_case(case.path)

    def _case_dirs(self) -> list[Path]:
        return [d for d in sorted(self.root.iterdir()) if d.is_dir() and not d.name.startswith(".")]

    def _discard(self, path: Path) -> None:
        trash = self.root / f"{TRASH_PREFIX}{path.name}-{uuid.uuid4().hex[:8]}"
        os.rename(path, trash)
        fsync_directory(self.root)
        shutil.rmtree(trash, ignore_errors=True)


def load_case(path: Path) -> CorpusCase:
    """Read and verify one case directory (raises :class:`CorruptCaseError`)."""
    record_path = path / CASE_FILE
    try:
        text = record_path.read_text()
    except FileNotFoundError:
        raise CorruptCaseError(f"no {CASE_FILE} (half-written or not a case)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CorruptCaseError(f"{CASE_FILE} unreadable ({exc})") from None
    record = CaseRecord.from_json(text)
    if record.case_id != path.name:
        raise CorruptCaseError(f"directory name does not match case id {record.case_id}")
    for required in (record.model_file, INPUTS_FILE):
        if required not in record.files:
            raise CorruptCaseError(f"{CASE_FILE} lists no hash for {required}")
    for name, digest in sorted(record.files.items()):
        file = path / name
        if not file.exists():
            raise CorruptCaseError(f"{name} is missing")
        if sha256_path(file) != digest:
            raise CorruptCaseError(f"{name} does not match its sha256 (tampered or truncated)")
    return CorpusCase(record, path)


def _materialize(new: NewCase, staging: Path) -> CaseRecord:
    """Write the model and inputs into ``staging`` and build the record (not yet saved)."""
    if new.source_kind not in SOURCE_KINDS:
        raise NebisectError(f"unknown source kind {new.source_kind!r}: one of "
                            f"{', '.join(SOURCE_KINDS)}")
    options = {k: v for k, v in new.options.items() if k != "params"}
    stamp = {**{k: v for k, v in provenance("").items() if v}, **new.provenance}
    kind, factory = _store_model(new, staging, stamp)
    record = CaseRecord(
        case_id="",
        source_kind=kind,
        target=new.target,
        stage=new.stage,
        factory=factory,
        reference=new.reference or ("torch:cpu:fp64" if kind == "torch" else "sim:fp64"),
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
    record.files = {
        record.model_file: sha256_path(staging / record.model_file),
        INPUTS_FILE: sha256_path(staging / INPUTS_FILE),
    }
    record.case_id = CorpusCase(record, staging).to_case().case_id
    return record


def _store_model(new: NewCase, staging: Path, stamp: dict[str, str]) -> tuple[str, str]:
    """Copy (or build) the model into ``staging``; the stored kind and torch factory."""
    if new.source_kind == "torch":
        from nebisect.torchsource import parse_location

        path, factory = parse_location(new.source)
        if not path.is_file():
            raise NebisectError(f"{path}: no such file")
        shutil.copyfile(path, staging / "model.py")
        return "torch", factory
    destination = staging / "model.mlpackage"
    if new.source_kind == "mlpackage":
        source = Path(new.source)
        if not (source / "Manifest.json").is_file():
            raise NebisectError(f"{source}: not an .mlpackage (no Manifest.json)")
        shutil.copytree(source, destination)
        return "mlpackage", ""
    from nebisect.artifact import Artifact
    from nebisect.mil.load import save_program

    params = new.options.get("params", {})
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

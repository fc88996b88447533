"""nebisect.files: atomic writes that fail cleanly, directories replaced without a gap,
and reads of files another process controls."""

from __future__ import annotations

import errno
import os
import shutil
import threading
from pathlib import Path

import numpy as np
import pytest
from support.full_disk import full_disk

from nebisect import files
from nebisect.arrays import save_npz
from nebisect.errors import NebisectError
from nebisect.files import (
    copy_directory,
    keep_existing,
    merge_into,
    read_json,
    read_untrusted,
    staged,
    write_bytes,
    write_text,
)

NO_SPACE = os.strerror(errno.ENOSPC)


def _enospc(*args: object) -> int:
    raise OSError(errno.ENOSPC, NO_SPACE)


def test_a_failed_write_removes_its_temp_and_names_path_and_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "report.json").write_text("old")
    monkeypatch.setattr(os, "write", _enospc)
    with pytest.raises(NebisectError) as caught:
        write_text(tmp_path / "report.json", "new")
    assert str(caught.value) == f"cannot write {tmp_path / 'report.json'}: {NO_SPACE}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
    assert (tmp_path / "report.json").read_text() == "old"


def test_writes_on_a_real_full_disk_fail_cleanly(tmp_path: Path) -> None:
    with full_disk(tmp_path / "disk") as disk:
        before = sorted(p.name for p in disk.iterdir())
        with pytest.raises(NebisectError, match=f"cannot write {disk / 'a.npz'}: {NO_SPACE}"):
            save_npz(disk / "a.npz", {"x": np.ones(100_000)})
        with (pytest.raises(NebisectError, match=f"cannot write {disk / 'out'}: {NO_SPACE}"),
              staged(disk / "out") as built):
            built.mkdir()
            (built / "big.bin").write_bytes(b"\0" * 100_000)
        assert sorted(p.name for p in disk.iterdir()) == before


def test_a_failure_inside_a_staged_directory_names_the_published_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(NebisectError) as caught, staged(tmp_path / "out") as built:
        built.mkdir()
        monkeypatch.setattr(os, "write", _enospc)
        write_text(built / "summary.json", "{}")
    assert str(caught.value) == f"cannot write {tmp_path / 'out' / 'summary.json'}: {NO_SPACE}"
    assert list(tmp_path.iterdir()) == []


def test_a_failed_directory_copy_is_one_reason_not_a_list(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """copytree collects every failed copy into one shutil.Error (no errno, a list of
    temporary paths as its message): the line names the destination and the reason."""
    source = tmp_path / "source"
    _package(source, 1, files_=3)
    monkeypatch.setattr(os, "sendfile", _enospc)  # how copyfile copies on Linux
    monkeypatch.setattr(shutil, "copyfileobj", _enospc)  # and elsewhere
    with pytest.raises(NebisectError) as caught:
        copy_directory(source, tmp_path / "copy")
    assert str(caught.value) == f"cannot write {tmp_path / 'copy'}: {NO_SPACE}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source"]


def test_an_exception_publishes_nothing(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), staged(tmp_path / "pkg") as built:
        built.mkdir()
        raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []


def _package(path: Path, version: int, files_: int = 8) -> None:
    path.mkdir()
    for index in range(files_):
        (path / f"part{index}").write_text(f"{version}\n" * 2000)


def _read_parts(package: Path) -> set[str]:
    """Every part of the package, each opened by its path as a loader opens it; a part
    must be there and whole."""
    versions = set()
    for index in range(8):
        lines = (package / f"part{index}").read_text().split()
        assert len(lines) == 2000, f"part{index} half-written"
        versions |= set(lines)
    return versions


def test_a_reader_never_sees_a_replaced_package_missing_or_half_written(
        tmp_path: Path) -> None:
    target = tmp_path / "model.mlpackage"
    _package(target, 0)
    failures: list[str] = []
    stop = threading.Event()
    reads = 0

    def reader() -> None:
        nonlocal reads
        while not stop.is_set():
            try:
                _read_parts(target)
            except (OSError, AssertionError) as exc:
                failures.append(repr(exc))
                return
            reads += 1

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for version in range(1, 200):
            with staged(target) as built:
                _package(built, version)
    finally:
        stop.set()
        thread.join()
    assert failures == []
    assert reads > 10
    assert _read_parts(target) == {"199"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.mlpackage"]


def test_replacing_without_renameat2_renames_the_old_one_aside(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(files, "_exchange", lambda new, target: False)
    source = tmp_path / "source"
    _package(source, 7)
    target = tmp_path / "copy"
    _package(target, 1)
    copy_directory(source, target)
    assert _read_parts(target) == {"7"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["copy", "source"]


def test_keep_existing_and_merge_into(tmp_path: Path) -> None:
    with staged(tmp_path / "cache", keep_existing) as built:
        built.write_text("first")
    with staged(tmp_path / "cache", keep_existing) as built:
        built.write_text("second")
    assert (tmp_path / "cache").read_text() == "first"
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "summary.json").write_text("old")
    with staged(out, merge_into) as built:
        built.mkdir()
        (built / "summary.json").write_text("new")
    assert {p.name: p.read_text() for p in out.iterdir()} == {"notes.txt": "mine",
                                                              "summary.json": "new"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "out"]


def test_write_bytes_creates_missing_parents(tmp_path: Path) -> None:
    write_bytes(tmp_path / "a" / "b" / "c.bin", b"xyz", durable=True)
    assert (tmp_path / "a" / "b" / "c.bin").read_bytes() == b"xyz"


def test_untrusted_reads_refuse_links_fifos_devices_and_oversize(tmp_path: Path) -> None:
    regular = tmp_path / "result.json"
    regular.write_bytes(b"0123456789")
    assert read_untrusted(regular, 10) == b"0123456789"
    assert read_untrusted(regular, 4, tail=True) == b"6789"
    with pytest.raises(NebisectError, match="larger than 4 bytes"):
        read_untrusted(regular, 4)
    link = tmp_path / "link"
    link.symlink_to("/dev/zero")
    with pytest.raises(NebisectError, match="is a symbolic link"):
        read_untrusted(link, 10)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(NebisectError, match="not a regular file but a FIFO"):
        read_untrusted(fifo, 10)
    with pytest.raises(FileNotFoundError):
        read_untrusted(tmp_path / "missing", 10)


def test_read_json_reads_a_regular_file_within_bounds_or_says_why_in_one_line(
        tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text('{"a": [1, 2.5, "x"]}')
    assert read_json(good) == {"a": [1, 2.5, "x"]}
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link.json"
    link.symlink_to(good)
    cases = {
        fifo: "is not a regular file but a FIFO",
        Path("/dev/zero"): "is not a regular file but a character device",
        tmp_path: "is not a regular file but a directory",
        tmp_path / "missing": "cannot read it (No such file or directory)",
    }
    for name, text in {"deep": "[" * 100_000 + "]" * 100_000, "big": "9" * 5000,
                       "latin1": b"\xff".decode("latin-1"), "nan": "NaN",
                       "twice": '{"a": 1, "a": 2}', "large": " " * 200}.items():
        (tmp_path / name).write_text(text, encoding="latin-1" if name == "latin1" else "utf-8")
    cases.update({
        tmp_path / "deep": "is nested deeper than 32 levels",
        tmp_path / "big": "holds a number longer than 40 characters",
        tmp_path / "latin1": "is not UTF-8 text",
        tmp_path / "nan": "is not valid JSON (NaN is no JSON number)",
        tmp_path / "twice": "holds the key 'a' twice in one object",
    })
    for path, reason in cases.items():
        with pytest.raises(NebisectError) as raised:
            read_json(path)
        assert str(raised.value) == f"{path}: {reason}"
    with pytest.raises(NebisectError) as raised:
        read_json(tmp_path / "large", 100)
    assert str(raised.value) == f"{tmp_path / 'large'}: is larger than 100 bytes"
    with pytest.raises(NebisectError, match="is a symbolic link"):
        read_json(link, follow_symlinks=False)

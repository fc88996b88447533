"""Content hashing and the untrusted-npz reader."""

from __future__ import annotations

import os
import zipfile

import numpy as np
import pytest
from support.npz_bombs import compressed_zeros, declared_bomb

from nebisect.arrays import MAX_INPUT_BYTES_VAR, load_npz, save_npz, sha256_arrays, sha256_path
from nebisect.errors import NebisectError


def test_directory_hash_is_deterministic_and_content_sensitive(tmp_path) -> None:
    pkg = tmp_path / "m.mlpackage"
    (pkg / "Data" / "weights").mkdir(parents=True)
    (pkg / "Manifest.json").write_text("{}")
    (pkg / "Data" / "weights" / "weight.bin").write_bytes(b"\x00" * 64)
    first = sha256_path(pkg)
    assert sha256_path(pkg) == first
    (pkg / "Data" / "weights" / "weight.bin").write_bytes(b"\x00" * 63 + b"\x01")
    assert sha256_path(pkg) != first
    (pkg / "Data" / "weights" / "weight.bin").write_bytes(b"\x00" * 64)
    assert sha256_path(pkg) == first
    (pkg / "Data" / "weights" / "weight.bin").rename(pkg / "Data" / "weights" / "w2.bin")
    assert sha256_path(pkg) != first


def test_missing_path_hash_is_user_error(tmp_path) -> None:
    with pytest.raises(NebisectError, match="no such file"):
        sha256_path(tmp_path / "absent.mlpackage")


def test_array_hash_depends_on_dtype_shape_and_name() -> None:
    x = np.arange(6, dtype=np.float32)
    base = sha256_arrays({"x": x})
    assert sha256_arrays({"x": x.copy()}) == base
    assert sha256_arrays({"x": x.astype(np.float16)}) != base
    assert sha256_arrays({"x": x.reshape(2, 3)}) != base
    assert sha256_arrays({"y": x}) != base


def test_npz_round_trip_and_corrupt_files(tmp_path) -> None:
    arrays = {"x": np.linspace(0, 1, 5, dtype=np.float16), "mask": np.ones((1, 3), np.int32)}
    path = tmp_path / "inputs.npz"
    save_npz(path, arrays)
    loaded = load_npz(path)
    assert sha256_arrays(loaded) == sha256_arrays(arrays)
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(path.read_bytes()[:40])
    with pytest.raises(NebisectError, match=r"truncated\.npz"):
        load_npz(truncated)
    pickled = tmp_path / "objects.npz"
    np.savez(pickled, x=np.array([{"a": 1}], dtype=object))
    with pytest.raises(NebisectError, match="not a plain numeric"):
        load_npz(pickled)
    with pytest.raises(NebisectError, match="no such inputs file"):
        load_npz(tmp_path / "absent.npz")


def test_npz_members_are_checked_by_their_headers_before_loading(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    bomb = declared_bomb(tmp_path / "declared.npz")
    assert bomb.stat().st_size < 1000
    with pytest.raises(NebisectError) as caught:
        load_npz(bomb)
    assert str(caught.value) == (
        f"{bomb}: member 'x' (float32 [131072, 131072]) is 64.0 GiB, over the 1.0 GiB input "
        f"limit (set {MAX_INPUT_BYTES_VAR} to raise it)")
    real = compressed_zeros(tmp_path / "zeros.npz", megabytes=16)
    assert real.stat().st_size < 100_000
    monkeypatch.setenv(MAX_INPUT_BYTES_VAR, str(8 << 20))
    with pytest.raises(NebisectError, match=r"'x' \(float32 \[4194304\]\) is 16.0 MiB, over "
                                            r"the 8.0 MiB input limit"):
        load_npz(real)
    monkeypatch.setenv(MAX_INPUT_BYTES_VAR, str(32 << 20))
    assert load_npz(real)["x"].shape == (4 << 20,)
    monkeypatch.setenv(MAX_INPUT_BYTES_VAR, "lots")
    with pytest.raises(NebisectError, match=f"{MAX_INPUT_BYTES_VAR}='lots': expected a "
                                            "positive byte count"):
        load_npz(real)


def test_npz_limit_is_on_the_total_and_foreign_members_are_refused(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "two.npz"
    save_npz(path, {"a": np.zeros(100), "b": np.zeros(100)})
    monkeypatch.setenv(MAX_INPUT_BYTES_VAR, "1000")
    with pytest.raises(NebisectError, match=r"member 'b' \(float64 \[100\]\) takes the arrays "
                                            r"to 1.6 KiB, over the 1000 bytes input limit"):
        load_npz(path)
    foreign = tmp_path / "foreign.npz"
    with zipfile.ZipFile(foreign, "w") as archive:
        archive.writestr("notes.txt", "not an array")
    with pytest.raises(NebisectError, match=r"member 'notes\.txt' is not an \.npy array"):
        load_npz(foreign)
    fifo = tmp_path / "fifo.npz"
    os.mkfifo(fifo)
    with pytest.raises(NebisectError, match=r"fifo\.npz: is not a regular file but a FIFO"):
        load_npz(fifo)

"""Hostile ``.npz`` files: zip bombs, by declaration and for real."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import numpy as np


def declared_bomb(path: Path, shape: tuple[int, ...] = (1 << 17, 1 << 17)) -> Path:
    """A few hundred bytes whose npy header declares ``shape`` float32 (64 GiB by
    default): a loader that trusts the header allocates it all before reading."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": shape})
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("x.npy", header.getvalue() + b"\0" * 256)
    return path


def compressed_zeros(path: Path, megabytes: int = 64) -> Path:
    """A real bomb: ``megabytes`` MiB of zeros in a deflated npz of a few dozen KiB."""
    np.savez_compressed(path, x=np.zeros(megabytes << 18, dtype=np.float32))
    return path

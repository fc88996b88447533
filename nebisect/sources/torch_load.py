"""Load a torch source, whichever form it takes, once per process and file content.

A location names a factory (``file.py:factory``: :mod:`nebisect.sources.torch_module`
builds it) or a saved program (``.pt2``, TorchScript:
:mod:`nebisect.sources.torch_saved` loads it); both give the same
:class:`~nebisect.sources.torch_module.TorchSource`. A template can hold the loaded
source (:func:`holding`), so the children it forks find it built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nebisect.arrays import sha256_path
from nebisect.case import FACTORY, TORCH, SourceRef, torch_form
from nebisect.errors import NebisectError
from nebisect.isolate import Hold, Needs
from nebisect.sources.torch_module import TorchSource, build_torch_source, parse_location
from nebisect.sources.torch_saved import load_saved

_loaded: dict[tuple[str, str, str], TorchSource] = {}


def load_torch_source(text: str) -> TorchSource:
    """Load (once per process and file content) and validate the torch source ``text``."""
    ref = SourceRef(TORCH, text)
    path = parse_location(text)[0] if torch_form(text) == FACTORY else Path(ref.file)
    if not path.is_file():
        raise NebisectError(f"{path}: no such file")
    build: Any = build_torch_source if torch_form(text) == FACTORY else load_saved
    key = (str(path.resolve()), ref.factory, sha256_path(path))
    if key not in _loaded:
        _loaded[key] = build(text)
    return _loaded[key]


def hold_source(text: str) -> None:
    """Build the source ``text`` and its fp64 copy in this process, torch held to one
    thread meanwhile: a template's held call (:func:`holding`), so the reference
    children it forks find the module built instead of importing the model's libraries
    and calling the factory each time (most of a real model's run). One thread: an
    intra-op pool started before ``fork`` is not usable in the child."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        load_torch_source(text).module_in(torch.float64)
    finally:
        torch.set_num_threads(threads)


def holding(location: str) -> Needs:
    """The needs of a child that finds the source at ``location`` built."""
    return Needs(holds=(Hold(f"{__name__}:hold_source", location),))

"""Conversions kept across runs, by content (``--cache DIR`` of ``run``, ``bisect`` and
``fuzz SOURCE``, or ``NEBISECT_CACHE``).

A conversion is a function of what it converts and how: the source's identity (the
factory file's bytes, the module's structure, its parameters and buffers, its example
inputs and dynamic dims), the paths tried, the precision, the deployment target, the
setup callables (nebisect's converter overrides, a user's converters), whether a failure
the overrides cure is converted again, and the versions of coremltools, torch, Python and
nebisect. :func:`conversion_key` hashes all of it, in the conversion child, once the
source is built: a second run of the same model finds its packages and its convert
verdict under that key and converts nothing.

An entry is a directory ``<key>/`` holding ``verdict.json``, the packages it saved
(``<path>.mlpackage``) and ``manifest.json``: the SHA-256 of every other file. It is
built beside the cache and renamed into place whole (:func:`~nebisect.files.staged`),
so a killed run leaves no half entry; it is checked against its manifest when read, and
an entry that does not match (a file changed, missing or added) is removed and the
conversion made again — :func:`lookup` says why. The cache holds at most
:data:`MAX_CACHE_BYTES`: storing an entry removes the least recently used ones beyond it.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nebisect.errors import NebisectError
from nebisect.files import MAX_JSON_CHARS, keep_existing, read_json, staged
from nebisect.verdict import Verdict
from nebisect.version import __version__

#: the environment variable that names the cache when ``--cache`` is not given
CACHE_ENV = "NEBISECT_CACHE"
#: the size the cache is held to (the least recently used entries go first)
MAX_CACHE_BYTES = 8 << 30
#: the files of an entry besides its packages
VERDICT_FILE, MANIFEST_FILE = "verdict.json", "manifest.json"


def cache_directory(given: str) -> str:
    """The cache a run uses, absolute (the conversion child may run elsewhere):
    ``given`` (``--cache``), else :data:`CACHE_ENV`, else none (``""``)."""
    chosen = given or os.environ.get(CACHE_ENV, "")
    return str(Path(chosen).absolute()) if chosen else ""


def conversion_key(source: Any, how: dict[str, Any]) -> str:
    """The SHA-256 of what determines a conversion of ``source`` (a built
    :class:`~nebisect.sources.torch_module.TorchSource`) done as ``how`` says (paths,
    precision, deployment target, setup, cure), with the versions that convert."""
    import coremltools
    import torch

    digest = hashlib.sha256()

    def add(label: str, value: bytes | str) -> None:
        data = value.encode() if isinstance(value, str) else value
        digest.update(f"{label}:{len(data)}:".encode())
        digest.update(data)

    add("how", json.dumps(how, sort_keys=True))
    add("versions", f"coremltools {coremltools.__version__}; torch {torch.__version__}; "
        f"python {platform.python_version()}; nebisect {__version__}")
    add("location", source.location)
    factory_file = Path(source.location.rpartition(":")[0] or source.location)
    if factory_file.is_file():
        add("factory", factory_file.read_bytes())
    add("module", repr(source.module))
    tensors = {**dict(source.module.named_parameters()), **dict(source.module.named_buffers())}
    for name, tensor in sorted(tensors.items()):
        _add_tensor(add, f"tensor {name}", tensor)
    for name, tensor in source.example_inputs.items():
        _add_tensor(add, f"input {name}", tensor)
    add("dynamic", repr(sorted((name, sorted(axes.items()))
                               for name, axes in source.dynamic_dims.items())))
    if source.traced is not None:
        add("traced", str(source.traced.inlined_graph))
    return digest.hexdigest()


def _add_tensor(add: Any, label: str, tensor: Any) -> None:
    """A tensor's dtype, shape and bytes (a bf16 tensor through its int16 view)."""
    import torch

    plain = tensor.detach().cpu().contiguous()
    raw = plain.view(torch.int16) if plain.dtype == torch.bfloat16 else plain
    add(f"{label} {plain.dtype} {tuple(plain.shape)}", raw.numpy().tobytes())


@dataclass(frozen=True)
class Lookup:
    """What :func:`lookup` found: the stored verdict (None on a miss) and, when an entry
    was there but could not be trusted, why (``ignored``)."""

    verdict: Verdict | None
    ignored: str = ""


def lookup(cache: Path, key: str, destinations: dict[str, str]) -> Lookup:
    """The entry ``key``: its packages copied to ``destinations`` (``{path: location}``)
    and its verdict, once every file matched the manifest; an entry that does not is
    removed (:class:`Lookup` says why) and counts as a miss."""
    entry = cache / key
    if not entry.is_dir():
        return Lookup(None)
    problem = _damage(entry)
    verdict = None
    if not problem:
        try:
            verdict = Verdict.read(entry / VERDICT_FILE)
        except NebisectError as exc:
            problem = f"unreadable verdict: {exc}"
    if verdict is None or problem:
        shutil.rmtree(entry, ignore_errors=True)
        return Lookup(None, f"cached conversion {key[:12]} ignored and made again ({problem})")
    saved = verdict.conversion.paths if verdict.conversion else None
    for path in saved or ():
        with staged(destinations[path]) as staging:
            shutil.copytree(entry / f"{path}.mlpackage", staging)
    os.utime(entry)
    return Lookup(verdict)


def _damage(entry: Path) -> str:
    """What in ``entry`` differs from its manifest ("" when nothing does)."""
    try:
        manifest = read_json(entry / MANIFEST_FILE, MAX_JSON_CHARS, follow_symlinks=False)
    except NebisectError as exc:
        return f"unreadable manifest: {exc}"
    if not isinstance(manifest, dict):
        return "unreadable manifest"
    present = _files(entry)
    if set(present) != set(manifest):
        changed = sorted(set(present) ^ set(manifest))
        return f"files missing or added: {', '.join(changed[:3])}"
    for name, file in present.items():
        if _sha256_file(file) != manifest[name]:
            return f"{name} changed"
    return ""


def store(cache: Path, key: str, verdict: Verdict, packages: dict[str, str]) -> None:
    """Keep ``verdict`` and the saved ``packages`` (``{path: location}``) as entry
    ``key``, whole or not at all, then hold the cache to :data:`MAX_CACHE_BYTES`."""
    cache.mkdir(parents=True, exist_ok=True)
    with staged(cache / key, keep_existing) as building:
        building.mkdir()
        (building / VERDICT_FILE).write_text(verdict.to_json())
        for path, location in packages.items():
            shutil.copytree(location, building / f"{path}.mlpackage")
        manifest = {name: _sha256_file(file) for name, file in _files(building).items()}
        (building / MANIFEST_FILE).write_text(json.dumps(manifest, sort_keys=True))
    _evict(cache, keep=key)


def cache_bytes(cache: Path) -> int:
    """The size of every entry in ``cache``."""
    return sum(_entry_bytes(entry) for entry in _entries(cache))


def _evict(cache: Path, keep: str) -> None:
    """Remove the least recently used entries (never ``keep``) while the cache holds more
    than :data:`MAX_CACHE_BYTES`."""
    entries = sorted(_entries(cache), key=lambda entry: entry.stat().st_mtime)
    sizes = {entry: _entry_bytes(entry) for entry in entries}
    total = sum(sizes.values())
    for entry in entries:
        if total <= MAX_CACHE_BYTES:
            break
        if entry.name != keep:
            shutil.rmtree(entry, ignore_errors=True)
            total -= sizes[entry]


def _entries(cache: Path) -> list[Path]:
    """The published entries (a hex key each; a staging directory is not one)."""
    if not cache.is_dir():
        return []
    return [entry for entry in cache.iterdir() if entry.is_dir() and len(entry.name) == 64
            and all(c in "0123456789abcdef" for c in entry.name)]


def _entry_bytes(entry: Path) -> int:
    return sum(file.stat().st_size for file in _files(entry).values())


def _files(entry: Path) -> dict[str, Path]:
    """Every file of an entry but its manifest, by its path relative to the entry."""
    return {str(file.relative_to(entry)): file for file in sorted(entry.rglob("*"))
            if file.is_file() and file != entry / MANIFEST_FILE}


def _sha256_file(file: Path) -> str:
    digest = hashlib.sha256()
    with file.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()

"""What of a ``.pt2`` runs code when it is loaded, and the mode that refuses it.

``torch.export.load`` reads an archive of JSON (the graph, the weights' layout) and raw
tensor bytes — data — but also pickles: a weight or constant torch could not write as
raw bytes (a tensor subclass) is stored with ``torch.save`` and loaded with Python's
unrestricted unpickler (``weights_only=False``), which can call any function; a script
object's constant likewise; and the example inputs, loaded with torch's weights-only
unpickler, fall back to the unrestricted one when that fails. A corpus case's
``model.pt2`` that looks like data may thus run code in the child that loads it.

With :data:`NO_PICKLE_ENV` set (``replay --no-pickle``: :func:`pickle_refusing`),
:func:`refuse_pickled` checks the archive's own layout first — a weight or constant
stored as a pickle, an object constant, or an archive of the older format is a one-line
error naming it — and the rest loads with every ``torch.load`` held to the weights-only
unpickler (``TORCH_FORCE_WEIGHTS_ONLY_LOAD``), which builds tensors and containers and
calls nothing else. The variable is read in the child that loads the program; every
isolated child of a command inherits it (a ``--cluster``'s workers do not: set it there).
"""

from __future__ import annotations

import contextlib
import json
import os
import zipfile
from collections.abc import Iterator
from typing import Any

from nebisect.errors import NebisectError

#: set (to anything but "" or "0"), a ``.pt2`` whose loading would unpickle is refused
NO_PICKLE_ENV = "NEBISECT_NO_PICKLE"
#: torch's switch that holds every ``torch.load`` to the weights-only unpickler
_WEIGHTS_ONLY_ENV = "TORCH_FORCE_WEIGHTS_ONLY_LOAD"
#: the archive's layouts of weights and constants (``data/…/{model}_…_config.json``)
_CONFIGS = ("data/weights/", "_weights_config.json"), ("data/constants/", "_constants_config.json")
#: constants that are objects, each unpickled (TorchScript's or Python's unpickler)
_OBJECT_PREFIXES = ("custom_obj_", "opaque_obj_")
#: the most a layout file may hold: a few hundred bytes a weight
_CONFIG_BYTES = 64 << 20


def pickle_refused() -> bool:
    """Does this process refuse ``.pt2`` files that unpickle (:data:`NO_PICKLE_ENV`)?"""
    return os.environ.get(NO_PICKLE_ENV, "") not in ("", "0")


def refuse_pickled(location: str) -> None:
    """Before the ``.pt2`` at ``location`` is loaded: when :func:`pickle_refused`, a
    one-line error if :func:`pickled_entries` finds any, and every ``torch.load`` of this
    process weights-only from now on (a child that loads a program in that mode)."""
    if not pickle_refused():
        return
    found = pickled_entries(location)
    if found:
        raise NebisectError(f"{location}: {found[0]} is stored as a pickle, which can run "
                            f"code when loaded; refused (--no-pickle, ${NO_PICKLE_ENV})")
    os.environ[_WEIGHTS_ONLY_ENV] = "1"


@contextlib.contextmanager
def pickle_refusing(refused: bool) -> Iterator[None]:
    """The block's isolated children refuse ``.pt2`` files that unpickle when
    ``refused`` (``--no-pickle``): :data:`NO_PICKLE_ENV` set in this process's
    environment, which every child started meanwhile inherits, and restored after."""
    if not refused:
        yield
        return
    before = os.environ.get(NO_PICKLE_ENV)
    os.environ[NO_PICKLE_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ[NO_PICKLE_ENV]
        else:
            os.environ[NO_PICKLE_ENV] = before


def pickled_entries(location: str) -> list[str]:
    """The weights and constants of the ``.pt2`` at ``location`` that its loading
    unpickles (``weight 'fc.weight'``, ``constant 'obj'``) — and the archive itself when
    it is not the zip of a PT2 archive, whose layout cannot be read."""
    try:
        with zipfile.ZipFile(location) as archive:
            files = {info.filename.split("/", 1)[-1]: info for info in archive.infolist()}
            if "archive_format" not in files:
                return ["the archive (no PT2 archive layout: an older torch.export format)"]
            found = []
            for (folder, suffix), kind in zip(_CONFIGS, ("weight", "constant"), strict=True):
                for name, info in files.items():
                    if name.startswith(folder) and name.endswith(suffix):
                        found += [f"{kind} {fqn!r}" for fqn, payload in
                                  _layout(archive, info, location).items()
                                  if _unpickled(payload)]
                found += [f"{kind} file {name!r}" for name in files
                          if name.startswith(folder) and name.endswith(".pt")]
            return found
    except (OSError, zipfile.BadZipFile) as exc:
        raise NebisectError(f"{location}: not a .pt2 archive ({exc})") from None


def _layout(archive: zipfile.ZipFile, info: zipfile.ZipInfo, location: str) -> dict[str, Any]:
    """A weights or constants layout file: fully-qualified name → its payload's record."""
    if info.file_size > _CONFIG_BYTES:
        raise NebisectError(f"{location}: {info.filename} is over {_CONFIG_BYTES >> 20} MiB")
    try:
        config = json.loads(archive.read(info)).get("config")
    except (ValueError, AttributeError):
        config = None
    if not isinstance(config, dict):
        raise NebisectError(f"{location}: {info.filename} is not a PT2 payload layout")
    return config


def _unpickled(payload: Any) -> bool:
    """Does loading this payload unpickle it (or is its record not one torch writes)?"""
    if not isinstance(payload, dict):
        return True
    path = str(payload.get("path_name", ""))
    return bool(payload.get("use_pickle", True)) or path.startswith(_OBJECT_PREFIXES)

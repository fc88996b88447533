"""The records that cross the process boundary, and the child's current stage.

Nothing is pickled: a job travels as JSON, a result comes back as a JSON verdict plus
an ``.npz`` of plain numeric arrays, so a compromised or confused child can hand the
parent data, never code.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.codec import Record
from nebisect.errors import NebisectError
from nebisect.files import read_untrusted
from nebisect.isolation.needs import NOTHING, Needs, check_function_name
from nebisect.verdict import Verdict

#: The stage file holds one fixed-width record, rewritten in place by a single pwrite,
#: so a parent reading it after a crash never sees half of an update.
_STAGE_WIDTH = 64


@dataclass
class Job(Record):
    """One unit of isolated work: ``function(arguments)`` in a process of its own.

    ``function`` is ``"package.module:function"``; it takes one record, its arguments,
    and returns a :class:`Verdict` or ``(Verdict, {name: array})``. ``payload`` is that
    record's JSON object (:func:`~nebisect.codec.encode`), read back in the child as the
    record the function's parameter is annotated with
    (:func:`~nebisect.codec.arguments_for`). ``stage`` is blamed for a crash until the child calls
    :func:`mark_stage`. ``timeout`` is wall seconds for the whole case (the process
    group is killed). ``memory_mb`` is the memory the function may add to what the
    child holds when it starts (:mod:`~nebisect.isolation.memory`; exhausting it gives
    ``oom``); an isolator gives a job without one its process's limit. ``threads`` is
    the job's share of the cores (:mod:`~nebisect.isolation.threads`; None: the child's
    defaults); an isolator gives a job without one its own share.
    ``needs`` is what the child must have in its process
    (:class:`~nebisect.isolation.needs.Needs`): a fork-mode template provides it once,
    before forking (and imports ``function``'s own module there on first use).
    """

    function: str
    payload: dict[str, Any]
    stage: str = "predict"
    timeout: float = 60.0
    memory_mb: int | None = None
    needs: Needs = NOTHING
    threads: int | None = None

    def __post_init__(self) -> None:
        check_function_name(self.function, "job function")
        if not self.timeout > 0:
            raise NebisectError(f"job timeout must be positive, got {self.timeout}")
        if self.memory_mb is not None and self.memory_mb <= 0:
            raise NebisectError(f"job memory_mb must be positive, got {self.memory_mb}")
        if self.threads is not None and self.threads <= 0:
            raise NebisectError(f"job threads must be positive, got {self.threads}")



@dataclass
class Outcome:
    """A verdict (always present) and the arrays the child returned (maybe none)."""

    verdict: Verdict
    arrays: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class _StageState:
    name: str = "predict"
    fd: int | None = None


_STAGE = _StageState()


def mark_stage(stage: str) -> None:
    """Declare that the calling child has entered ``stage`` (convert, load, predict…).

    A crash from here on is attributed to this stage: the parent reads the stage file
    after the child died. Outside an isolated child this only records the name.
    """
    _STAGE.name = stage
    if _STAGE.fd is not None:
        record = stage.encode()[:_STAGE_WIDTH].ljust(_STAGE_WIDTH)
        os.pwrite(_STAGE.fd, record, 0)


def current_stage() -> str:
    return _STAGE.name


def bind_stage_file(path: Path, stage: str) -> None:
    """Make :func:`mark_stage` persist to ``path`` (one case's stage file)."""
    if _STAGE.fd is not None:
        os.close(_STAGE.fd)
    _STAGE.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    mark_stage(stage)


def read_stage_file(path: Path) -> str | None:
    """The stage a (dead) child declared last; None if its stage file is unusable."""
    try:
        text = read_untrusted(path, _STAGE_WIDTH).decode(errors="replace").strip()
    except (OSError, NebisectError):
        return None
    return text or None


class CaseFiles:
    """File names inside one case directory (shared by the child and the parent)."""

    REQUEST = "request.json"
    STAGE = "stage"
    RESULT = "result.json"
    ARRAYS = "arrays.npz"
    STDERR = "stderr.log"
    TEMP = "tmp"


#: Messages by which allocators report exhaustion: numpy/CPython raise MemoryError
#: ("Unable to allocate 26.8 GiB for an array ..."), torch raises RuntimeError("...
#: can't allocate memory ..."), C++ aborts on bad_alloc.
OOM_PATTERN = re.compile(
    r"MemoryError|can't allocate memory|cannot allocate memory|out of memory|std::bad_alloc"
    r"|Unable to allocate",
    re.IGNORECASE,
)


def is_out_of_memory(exc: BaseException) -> bool:
    """Did ``exc`` come from an allocation the memory limit refused? Code that turns
    exceptions into ``error`` verdicts lets these through: they are ``oom``."""
    return isinstance(exc, MemoryError) or bool(OOM_PATTERN.search(f"{type(exc).__name__}: {exc}"))

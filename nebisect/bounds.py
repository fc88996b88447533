"""The bounds of numeric options, one check per kind of value.

* **seconds** (``--timeout``, ``--case-timeout``, bisect's search ``--timeout``): a
  positive number, at most a day. A wait hands its limit to the kernel in a C integer
  of milliseconds, so ``--timeout 2200000`` overflowed it deep inside a run;
* **seeds** (``--seed``): the unsigned 32-bit integers every random generator accepts
  (numpy refuses a negative one);
* **counts** (budgets, ``--max-evals``, lengths, ``--jobs``): at least 1, and at most
  :data:`MAX_COUNT` — or :data:`MAX_JOBS` for ``--jobs``, which starts that many workers;
* **memory sizes** (``--memory``): at least :data:`MIN_MEMORY` (a case process needs room
  to load numpy's first arrays) and at most :data:`MAX_MEMORY` (beyond any machine; the
  limit is handed to the kernel as a 64-bit count of bytes).

Each check takes ``where`` — the option and the value as the user wrote them
(``--seed -1``) — and returns the value, or raises a one-line
:class:`~nebisect.errors.NebisectError` beginning with ``where`` (exit 2).
"""

from __future__ import annotations

from nebisect.errors import NebisectError

MAX_SECONDS = 86_400.0
MAX_SEED = 2**32 - 1
MAX_COUNT = 10**9
MAX_JOBS = 1024
MIN_MEMORY = 64 << 20
MAX_MEMORY = 1 << 50
#: the binary units of a memory size, as ``--memory`` takes them
MEMORY_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def check_seconds(where: str, seconds: float) -> float:
    """``seconds`` if it is in (0, :data:`MAX_SECONDS`] (NaN and infinity are not)."""
    if not 0 < seconds <= MAX_SECONDS:
        raise NebisectError(f"{where}: seconds must be a positive number, at most "
                            f"{MAX_SECONDS:.0f} (one day)")
    return seconds


def check_seed(where: str, seed: int) -> int:
    """``seed`` if it is in [0, :data:`MAX_SEED`]."""
    if not 0 <= seed <= MAX_SEED:
        raise NebisectError(f"{where}: give a seed from 0 to {MAX_SEED}")
    return seed


def check_count(where: str, count: int, most: int = MAX_COUNT, *, least: int = 1) -> int:
    """``count`` if it is in [``least``, ``most``] (``least`` 0: a budget that may be
    turned off, such as ``--shrink-budget 0``)."""
    if count < least:
        raise NebisectError(f"{where}: give at least {least}")
    if count > most:
        raise NebisectError(f"{where}: give at most {most}")
    return count


def check_memory(where: str, size: int) -> int:
    """``size`` bytes if it is in [:data:`MIN_MEMORY`, :data:`MAX_MEMORY`]."""
    if not MIN_MEMORY <= size <= MAX_MEMORY:
        raise NebisectError(f"{where}: give a size from 64M to 1024T")
    return size


def format_size(size: int) -> str:
    """Bytes as ``--memory`` takes them: ``11.8G``, ``512M``."""
    for unit in ("T", "G", "M", "K"):
        if size >= MEMORY_UNITS[unit]:
            return f"{size / MEMORY_UNITS[unit]:.3g}{unit}"
    return f"{size}B"

"""Option parsing that more than one command shares.

Each parser turns one option's text into a checked value or raises a one-line
:class:`~nebisect.errors.NebisectError` naming the option, which the CLI prints with
exit 2.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from nebisect.bounds import MEMORY_UNITS, check_count, check_memory, check_seconds
from nebisect.errors import NebisectError
from nebisect.isolation import memory
from nebisect.sources.domains import (
    INPUT_RANGE_FORMAT,
    MASKED_OUTPUT_FORMAT,
    InputDomain,
    parse_input_range,
    parse_masked_output,
)

#: the value an option of the form ``NAME=…`` gives each name
T = TypeVar("T")

INPUT_RANGE_HELP = (
    f"The values an input really takes: {INPUT_RANGE_FORMAT} (repeatable; wins over the "
    "factory's 'input_domains'). Exploration stays inside — an image's every pixel on its "
    "channel's 8-bit levels; a hazard only beyond it is reported as a margin, not a "
    "failure."
)
#: the metavar of ``--input-range``
INPUT_RANGE_METAVAR = "NAME=DOMAIN"

MASKED_OUTPUT_HELP = (
    f"Compare an output only where a mask input is 1: {MASKED_OUTPUT_FORMAT} "
    "(repeatable). What a model leaves at padded positions is nobody's bug. Outputs whose "
    "leading axes are a mask's (batch, seq) shape are inferred so; declaring any replaces "
    "the inferred ones, and the report says which were used. MASK must be a mask input: "
    "one the graph reads as a mask (a package's), or declared with --input-range MASK=mask."
)

MEMORY_HELP = (
    "Memory each isolated step may use on top of what its process holds at start, e.g. "
    f"4G or 512M (default: {memory.DEFAULT_FRACTION:.0%} of this machine's memory; the API "
    "also takes a number of bytes). A step past it is an 'oom' verdict; a program declaring "
    "a tensor it cannot hold (8 bytes an element) is refused before anything is allocated."
)
#: ``--function NAME``, for every command that takes a package (``run`` judges every
#: function without it: its help says so)
FUNCTION_HELP = ("The function of a multifunction .mlpackage (ct.utils.save_multifunction) "
                 "to take (default: the package's default function).")
_DURATION = re.compile(r"(?P<plain>\d+(?:\.\d*)?)|(?:(?P<h>\d+(?:\.\d*)?)h)?\s*"
                       r"(?:(?P<m>\d+(?:\.\d*)?)m)?\s*(?:(?P<s>\d+(?:\.\d*)?)s)?")
_DURATION_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0}
_SIZE = re.compile(r"(?P<number>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>[KMGT])(?:I?B)?", re.IGNORECASE)

#: ``--convert`` → the conversion paths it evaluates, in order
CONVERT_CHOICES = {"export": ("export",), "trace": ("trace",), "both": ("export", "trace")}


def parse_choice(option: str, text: str, choices: Iterable[str]) -> str:
    """``text`` if it is one of ``choices``; else a one-line error listing them."""
    if text not in choices:
        raise NebisectError(f"{option} {text!r}: one of {', '.join(choices)}")
    return text


def source_path(source: str) -> Path:
    """The file or package a source string names (``file.py:factory`` → ``file.py``):
    what a command reads, which its outputs must not overwrite."""
    path, _, _ = source.rpartition(":")
    return Path(path) if path.endswith(".py") else Path(source)


def parse_families(text: str) -> list[str] | None:
    """The chosen value families (None: all), each checked against the registry."""
    if not text:
        return None
    from nebisect.inputs.families import FAMILIES

    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise NebisectError(f"--families {text!r}: give comma-separated family names")
    for name in names:
        FAMILIES.get(name)
    return names


def parse_input_ranges(texts: Iterable[str] | None) -> dict[str, InputDomain]:
    """Every ``--input-range`` option, by input name (an input named twice is an error)."""
    return _by_name("--input-range", texts, parse_input_range)


def parse_masked_outputs(texts: Iterable[str] | None) -> dict[str, str]:
    """Every ``--masked-output`` option, by output name (an output named twice is an
    error); checked against the model's outputs and masks once it is resolved."""
    return _by_name("--masked-output", texts, parse_masked_output)


def _by_name(option: str, texts: Iterable[str] | None,
             parse: Callable[[str], tuple[str, T]]) -> dict[str, T]:
    """Each ``option`` value parsed into (name, value), by name: a name given twice is a
    one-line error."""
    found: dict[str, T] = {}
    for text in texts or ():
        name, value = parse(text)
        if name in found:
            raise NebisectError(f"{option}: {name!r} is given twice")
        found[name] = value
    return found


def parse_budget(text: str) -> int:
    """``--budget``: a whole, positive number of predictions."""
    return _predictions("--budget", text)


def parse_steps(text: str) -> int:
    """``--steps``: a whole, positive number of successive predictions."""
    return _predictions("--steps", text)


def _predictions(option: str, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise NebisectError(f"{option} {text!r}: give a whole number of predictions") from None
    return check_count(f"{option} {text}", value)


def parse_compression_tolerance(text: str) -> float:
    """``--compression-tolerance``: a positive, finite fraction of an output's scale."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise NebisectError(f"--compression-tolerance {text!r}: give a positive fraction of "
                            "an output's scale, e.g. 0.05")
    return value


def parse_duration(option: str, text: str | float | None) -> float | None:
    """A wall-time length: ``90s``, ``5m``, ``1h``, ``1m30s``, or plain seconds as
    ``--timeout`` takes them → seconds, checked; None when the option is not given."""
    if text is None or text == "":
        return None
    spoken = str(text).strip().lower()
    parts = _DURATION.fullmatch(spoken) if spoken else None
    if parts is None:
        raise NebisectError(f"{option} {text!r}: give a duration such as 5m, 90s or 1h30m")
    seconds = (float(parts["plain"]) if parts["plain"] else
               sum(float(parts[unit] or 0) * scale for unit, scale in _DURATION_UNITS.items()))
    return check_seconds(f"{option} {text!r}", seconds)


def parse_memory(text: str | int | None) -> int | None:
    """``--memory``: a size in binary units (``4G``, ``512M``, ``1.5g``, ``4GiB``) → bytes,
    checked; None (the machine default) when the option is not given. The API's
    ``memory=2 << 30`` is a number of bytes (a bare number on the command line is not:
    ``--memory 4096`` may mean megabytes)."""
    if text is None:
        return None
    if isinstance(text, int):
        return check_memory(f"memory={text}", text)
    found = _SIZE.fullmatch(text.strip())
    if found is None:
        raise NebisectError(f"--memory {text!r}: give a size such as 4G or 512M")
    size = int(float(found["number"]) * MEMORY_UNITS[found["unit"].upper()])
    return check_memory(f"--memory {text}", size)


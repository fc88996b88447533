"""Which ops and samples a sweep judges: ``--ops``, ``--dtypes``, the default op list.

The default sweep is :data:`DEFAULT_OPS`: the ops behind the published converter bugs
nebisect ships as examples, and the elementwise, reduction, normalization and
activation ops every transformer and convnet converts through — a sweep that finishes
in minutes on two cores. ``--all`` is every op of torch's database that has a public
torch function. Of each op, the first sample of every call form is judged
(:func:`~nebisect.atlas.samples.first_of_each_form`).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from nebisect.atlas.samples import (
    SAMPLE_DTYPES,
    OpSample,
    Sample,
    first_of_each_form,
    op_database,
    op_name,
    samples_of,
)
from nebisect.errors import NebisectError

DEFAULT_OPS = (
    # published converter bugs (examples/published/)
    "reciprocal", "remainder", "floor_divide", "div.floor_rounding", "div.trunc_rounding",
    "var", "std", "nn.functional.gelu", "log_softmax", "nn.functional.rms_norm",
    # what models convert through
    "add", "sub", "mul", "div.no_rounding_mode", "pow", "sqrt", "rsqrt", "exp", "log",
    "sigmoid", "tanh", "nn.functional.silu", "nn.functional.softplus", "softmax",
    "logsumexp", "nn.functional.layer_norm", "mean", "sum", "amax", "cumsum", "clamp",
    "nn.functional.avg_pool2d", "nn.functional.pad.constant",
)
DEFAULT_DTYPES = ("float32", "int32")
#: the most pattern programs one sweep generates
MAX_PATTERNS = 100_000


@dataclass
class Plan:
    """The samples to judge, in order; per op the samples it could not make, and the
    axes its samples cover (:func:`covered_axes`)."""

    samples: list[Sample] = field(default_factory=list)
    unsampled: dict[str, list[str]] = field(default_factory=dict)
    covered: dict[str, list[str]] = field(default_factory=dict)


def parse_dtypes(text: str) -> tuple[str, ...]:
    """``--dtypes float32,int32`` → the dtype names, checked."""
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in SAMPLE_DTYPES]
    if unknown or not names:
        raise NebisectError(f"--dtypes {text!r}: a comma-separated list of "
                            f"{', '.join(SAMPLE_DTYPES)}")
    return names


def plan(ops: Sequence[str] | None, dtypes: Sequence[str], *, every: bool = False) -> Plan:
    """The samples of ``ops`` (None: :data:`DEFAULT_OPS`; ``every``: the whole database)
    at ``dtypes``. An op name the database does not have is a one-line error naming
    the nearest ones."""
    database = {op_name(info): info for info in op_database()}
    if every:
        chosen: list[Any] = list(database.values())
    else:
        names = list(ops) if ops else list(DEFAULT_OPS)
        unknown = [name for name in names if name not in database]
        if unknown:
            close = difflib.get_close_matches(unknown[0], database, n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise NebisectError(f"--ops: {', '.join(map(repr, unknown))} not in torch's op "
                                f"database{hint}; 'nebisect atlas --list-ops' lists them")
        chosen = [database[name] for name in dict.fromkeys(names)]
    result = Plan()
    for info in chosen:
        made = list(samples_of(info, dtypes))
        kept = first_of_each_form(s for s in made if isinstance(s, OpSample))
        result.samples.extend(kept)
        if kept:
            result.covered[op_name(info)] = covered_axes(kept)
        reasons = [s for s in made if isinstance(s, str)]
        if reasons:
            result.unsampled[op_name(info)] = reasons
    return result


def covered_axes(samples: Sequence[OpSample]) -> list[str]:
    """The axes an op's samples cover: the dtypes they are at, then how they were moved
    (``one``: constants set to 1; ``neg-dims``, ``neg-start``, ``flip-NAME``, ``neg-inf``:
    :func:`~nebisect.atlas.samples.mutations`), each once, in order."""
    dtypes = [s.index.split(":")[0] for s in samples]
    moved = [axis for s in samples for axis in s.index.split(":")[2:] if axis != "shrunk"]
    return list(dict.fromkeys([*dtypes, *moved]))


def op_names() -> list[str]:
    """Every op of the database, as ``--ops`` takes them."""
    return sorted(op_name(info) for info in op_database())


def pattern_plan(count: int, seed: int) -> Plan:
    """The first ``count`` pattern programs of the campaign ``seed``
    (:func:`nebisect.patterns.program.campaign`)."""
    from nebisect.patterns.program import campaign

    return Plan(list(campaign(count, seed)))

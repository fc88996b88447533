"""One wall-clock timeout per stage, parsed from the same ``--timeout`` option everywhere.

A stage that runs user code or a converter can hang: describing a torch source calls
the user's factory, conversion traces the user's ``forward``, prediction runs a device.
Each gets its own limit so that a slow but healthy conversion does not force a long
limit on every prediction, and every limit reaches the isolated child that runs the
stage (a fixed 900 s once hid behind ``--timeout``).

The option grammar (``--timeout SECONDS`` for every stage, ``--timeout STAGE=SECONDS``
for one, repeatable) is shared by every command that runs these stages, so a user who
learnt it on ``run`` knows it on ``replay``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from nebisect.bounds import check_seconds
from nebisect.errors import NebisectError
from nebisect.verdict import Stage

#: The stages a timeout applies to, in pipeline order.
TIMEOUT_STAGES = (Stage.LOAD, Stage.CONVERT, Stage.PREDICT)

TIMEOUT_METAVAR = "[STAGE=]SECONDS"
TIMEOUT_HELP = (
    "Wall-clock limit of each isolated step; past it the step's process group is killed and "
    "the step is a 'timeout' verdict (a user source or plugin that hangs while loading is "
    "an error, exit 2). SECONDS applies to every stage; STAGE=SECONDS (repeatable) to one: "
    "load (describing a torch source or plugin in a child), convert (torch → Core ML), "
    "predict (one case: load the model, predict, compute the reference). "
    "E.g. --timeout 60 --timeout convert=600."
)


@dataclass(frozen=True)
class Timeouts:
    """Seconds per stage (defaults: a factory may download weights; conversion is slow)."""

    load: float = 300.0
    convert: float = 900.0
    predict: float = 120.0

    @classmethod
    def parse(cls, values: Sequence[str] | None, defaults: Timeouts | None = None,
              option: str = "--timeout") -> Timeouts:
        """``["60", "convert=600"]`` → every stage 60 s but convert 600 s.

        A plain value applies first whatever its position, so ``STAGE=SECONDS`` always
        wins for its stage.
        """
        chosen = defaults or cls()
        entries = [_entry(text, option) for text in values or ()]
        for stage, seconds in sorted(entries, key=lambda e: e[0] != ""):
            stages = TIMEOUT_STAGES if not stage else (stage,)
            chosen = replace(chosen, **dict.fromkeys(stages, seconds))
        return chosen


def _entry(text: str, option: str) -> tuple[str, float]:
    stage, sep, number = text.strip().rpartition("=")
    if sep and stage not in TIMEOUT_STAGES:
        raise NebisectError(f"{option} {text!r}: unknown stage {stage!r}, one of "
                            f"{', '.join(TIMEOUT_STAGES)}")
    try:
        seconds = float(number)
    except ValueError:
        raise NebisectError(f"{option} {text!r}: give SECONDS or STAGE=SECONDS, e.g. "
                            "60 or convert=600") from None
    return stage, check_seconds(f"{option} {text!r}", seconds)


#: The limits a command uses when the user gives no ``--timeout``.
DEFAULT_TIMEOUTS = Timeouts()

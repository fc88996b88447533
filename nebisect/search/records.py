"""The records of an exploration (:mod:`nebisect.search.explore`): JSON round-trip, no arrays.

* :class:`Observation` — what the injected ``evaluate`` returns for one input set on
  one program: the verdict plus two opaque keys the engine groups by (the culprit op
  type and the conversion path) and an optional JSON-able output summary;
* :class:`Exploration` — the result: predictions spent (in all and per family), the
  failure groups, the localized cliffs, the guided probes' outcomes, what was left
  unexplored and why the search stopped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from nebisect.codec import Form, Record
from nebisect.search.cliff import Boundary, Cliff
from nebisect.search.space import Member
from nebisect.verdict import Verdict

#: what failures are grouped by: (signature, culprit op type, conversion path)
Key = tuple[str, str, str]


@dataclass
class Observation:
    """One verdict of one input set, with the keys failures are grouped by.

    ``culprit`` (e.g. ``reduce_log_sum_exp``) and ``path`` (``export`` / ``trace``) are
    opaque to the engine; ``output`` (any JSON-able summary, e.g. the first output
    value) is what a probe of a localized cliff records. ``arrays`` — the outputs as a
    judged case returns them (``out:NAME``, ``ref:NAME``), kept in memory only — let a
    cliff show both its sides at the element that breaks
    (:mod:`nebisect.search.readout`); without them each side shows its ``output``.
    """

    verdict: Verdict
    culprit: str = ""
    path: str = ""
    output: Any = None
    arrays: Mapping[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    @property
    def key(self) -> Key | None:
        """The group key of a failure; None for a pass (or a skip)."""
        if not self.verdict.failed:
            return None
        return (self.verdict.signature, self.culprit, self.path)


@dataclass
class FamilyTally:
    """Where the predictions went in one family."""

    planned: int = 0
    predictions: int = 0
    failures: int = 0
    #: planned member labels never evaluated (the budget ran out first)
    unexplored: list[str] = field(default_factory=list)


@dataclass
class Group(Record):
    """Failures with one (signature, culprit, path): one bug, however many inputs show it.

    ``smallest`` is the member nearest the benign start (smallest shrink key, see
    :class:`~nebisect.inputs.families.base.Member`); ``members`` every input set it
    covers, in evaluation order; ``message`` the smallest member's verdict message.
    """

    signature: str
    culprit: str
    path: str
    smallest: Member
    message: str = ""
    members: list[Member] = field(default_factory=list)

    @property
    def key(self) -> Key:
        return (self.signature, self.culprit, self.path)

    @property
    def families(self) -> list[str]:
        return list(dict.fromkeys(m.family for m in self.members))


@dataclass
class CliffFinding(Record):
    """A model-level cliff: one family's parameter localized on the fp16 grid for one group.

    ``cliff`` carries the bracket (adjacent fp16 values when ``complete``), the output on
    each side, every probe, and the boundary theory predicts when a guided probe lies
    near; ``spent`` counts the fresh predictions the localization cost (probes answered
    by earlier exploration are free). ``stopped`` says why a bracket that is not
    ``complete`` stopped short (the exploration's stop: its budget, its deadline): such
    a bracket shows where the family is failing from, not a cliff.

    ``series`` is what the report's cliff plot draws: the first output of every target
    of the run (and of the reference, under ``reference``) at the probes nearest the
    bracket, ``chart_x``, on the same conversion path — charting predictions, not
    counted in ``spent``. Its JSON also says whether it is :attr:`complete`.
    """

    json_form: ClassVar[Form] = Form(derived=(("complete", "spent"),))

    family: str
    signature: str
    culprit: str
    path: str
    cliff: Cliff
    spent: int
    chart_x: list[float] = field(default_factory=list)
    series: dict[str, list[float | None]] = field(default_factory=dict)
    stopped: str | None = None

    @property
    def complete(self) -> bool:
        return self.cliff.ulps == 1


@dataclass
class GuidedOutcome(Record):
    """A guided probe evaluated just below and just above its boundary.

    ``confirmed`` is True when the member above fails in a way the one below does not
    (the static warning is a finding), False when both agree (refuted at this input),
    None when the budget ran out first.
    """

    boundary: Boundary
    below: str
    above: str
    confirmed: bool | None = None


@dataclass
class Exploration(Record):
    """The result of one exploration. ``stopped`` says why it ended before evaluating
    every planned member (None: every member was evaluated)."""

    budget: int
    spent: int = 0
    stopped: str | None = None
    families: dict[str, FamilyTally] = field(default_factory=dict)
    guided: list[GuidedOutcome] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    cliffs: list[CliffFinding] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, default=float)

    @classmethod
    def from_json(cls, text: str) -> Exploration:
        return cls.from_dict(json.loads(text))

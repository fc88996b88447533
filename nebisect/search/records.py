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
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

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
class Group:
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Group:
        return cls(data["signature"], data["culprit"], data["path"],
                   Member.from_dict(data["smallest"]), data.get("message", ""),
                   [Member.from_dict(m) for m in data.get("members", [])])


@dataclass
class CliffFinding:
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
    counted in ``spent``.
    """

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

    def to_dict(self) -> dict[str, Any]:
        return {"family": self.family, "signature": self.signature, "culprit": self.culprit,
                "path": self.path, "cliff": self.cliff.to_dict(), "spent": self.spent,
                "complete": self.complete, "chart_x": self.chart_x, "series": self.series,
                "stopped": self.stopped}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CliffFinding:
        return cls(data["family"], data["signature"], data["culprit"], data["path"],
                   Cliff.from_dict(data["cliff"]), int(data["spent"]),
                   [float(x) for x in data.get("chart_x", [])],
                   {k: list(v) for k, v in data.get("series", {}).items()},
                   data.get("stopped"))


@dataclass
class GuidedOutcome:
    """A guided probe evaluated just below and just above its boundary.

    ``confirmed`` is True when the member above fails in a way the one below does not
    (the static warning is a finding), False when both agree (refuted at this input),
    None when the budget ran out first.
    """

    boundary: Boundary
    below: str
    above: str
    confirmed: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"boundary": self.boundary.to_dict(), "below": self.below, "above": self.above,
                "confirmed": self.confirmed}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GuidedOutcome:
        return cls(Boundary.from_dict(data["boundary"]), data["below"], data["above"],
                   data.get("confirmed"))


@dataclass
class Exploration:
    """The result of one exploration. ``stopped`` says why it ended before evaluating
    every planned member (None: every member was evaluated)."""

    budget: int
    spent: int = 0
    stopped: str | None = None
    families: dict[str, FamilyTally] = field(default_factory=dict)
    guided: list[GuidedOutcome] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    cliffs: list[CliffFinding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget": self.budget, "spent": self.spent, "stopped": self.stopped,
            "families": {name: asdict(t) for name, t in self.families.items()},
            "guided": [g.to_dict() for g in self.guided],
            "groups": [g.to_dict() for g in self.groups],
            "cliffs": [c.to_dict() for c in self.cliffs],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, default=float)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Exploration:
        return cls(
            budget=int(data["budget"]), spent=int(data["spent"]), stopped=data.get("stopped"),
            families={name: FamilyTally(**t) for name, t in data.get("families", {}).items()},
            guided=[GuidedOutcome.from_dict(g) for g in data.get("guided", [])],
            groups=[Group.from_dict(g) for g in data.get("groups", [])],
            cliffs=[CliffFinding.from_dict(c) for c in data.get("cliffs", [])],
        )

    @classmethod
    def from_json(cls, text: str) -> Exploration:
        return cls.from_dict(json.loads(text))

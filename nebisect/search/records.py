"""The records of an exploration (:mod:`nebisect.search.explore`): JSON round-trip, no arrays.

* :class:`Observation` — what the injected ``evaluate`` returns for one input set on
  one program: the verdict, where its failure enters (the attribution and the
  :class:`Culprit` op, both opaque to the engine), the conversion path, and an optional
  JSON-able output summary;
* :class:`FailureGroup` — one bug: failures with one :class:`GroupKey` (target,
  signature, culprit key, conversion path), however many input sets show it. The
  engine fills one per key as it explores; ``run`` groups its rows (matrix and
  exploration alike) into the same record and attaches the cliffs localized for each;
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
from nebisect.search.divergence import OpError
from nebisect.search.space import Member
from nebisect.verdict import Verdict


@dataclass(frozen=True)
class Culprit(Record):
    """The op where a divergence enters: name, type, the mismatch kind it shows there,
    and what was compared to find it (``matched``: by intermediates, not only outputs).

    ``ops`` is the divergence along the program: each op's error (max ULP at the
    target's precision over the values it produces) from a few ops before the culprit
    to a few past it — what the report's per-op divergence chart draws. Empty when only
    outputs were compared. ``rules`` names the Core ML runtime rules the op breaks (a
    published difference that may be the divergence's cause). :mod:`nebisect.detect.culprit`
    finds it.
    """

    op: str
    op_type: str
    signature: str
    compared: str
    matched: bool = True
    ops: tuple[OpError, ...] = ()
    rules: tuple[str, ...] = ()
    #: the inf/NaN constants the op reads (``'var_37' = -inf``): where a program's own
    #: non-finite values come from
    constants: tuple[str, ...] = ()

    def describe(self) -> str:
        """``reduce_log_sum_exp "var_12"`` (with ``(output)`` when only outputs matched,
        and the inf/NaN constants it reads)."""
        read = f" reading constant {', '.join(self.constants)}" if self.constants else ""
        return f'{self.op_type} "{self.op}"' + ("" if self.matched else " (output)") + read


def culprit_key(attribution: str, culprit: Culprit | None) -> str:
    """What a group's culprit is keyed by: the attribution and the op type
    (``device at reduce_log_sum_exp``; ``?`` when no op could be named). The attribution
    is part of it because one op can be a conversion bug at one input and a precision
    hazard at another: two bugs."""
    return f"{attribution} at {culprit.op_type if culprit else '?'}"


@dataclass(frozen=True)
class GroupKey:
    """What tells one bug from another: the target, the signature, the culprit key
    (:func:`culprit_key`) and the conversion path. Observations, rows, failure groups
    and the cliffs localized for them all name theirs by it."""

    target: str
    signature: str
    culprit: str
    path: str

    @classmethod
    def of_cliff(cls, target: str, cliff: CliffFinding) -> GroupKey:
        """The key of the group a cliff localized on ``target`` belongs to."""
        return cls(target, cliff.signature, cliff.culprit, cliff.path)


@dataclass
class Observation:
    """One verdict of one input set, with what its failure is grouped by.

    ``culprit`` (the op where the failure enters), ``attribution`` (``conversion`` /
    ``precision`` / ``device``) and ``path`` (``export`` / ``trace``) are opaque to the
    engine: it groups by them and by ``target`` (:attr:`key`) and copies them into the
    group. ``output`` (any JSON-able summary, e.g. the first output value) is
    what a probe of a localized cliff records. ``arrays`` — the outputs as a
    judged case returns them (``out:NAME``, ``ref:NAME``), kept in memory only — let a
    cliff show both its sides at the element that breaks
    (:mod:`nebisect.search.readout`); without them each side shows its ``output``.
    """

    verdict: Verdict
    culprit: Culprit | None = None
    path: str = ""
    output: Any = None
    arrays: Mapping[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    attribution: str = ""
    target: str = ""

    @property
    def key(self) -> GroupKey | None:
        """The group key of a failure; None for a pass (or a skip)."""
        if not self.verdict.failed:
            return None
        return GroupKey(self.target, self.verdict.signature,
                        culprit_key(self.attribution, self.culprit), self.path)


@dataclass
class FamilyTally:
    """Where the predictions went in one family."""

    planned: int = 0
    predictions: int = 0
    failures: int = 0
    #: planned member labels never evaluated (the budget ran out first)
    unexplored: list[str] = field(default_factory=list)


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
class FailureGroup(Record):
    """Failures with one :class:`GroupKey`: one bug on one target and path, however many
    input sets show it.

    ``smallest`` is the member nearest the benign start (smallest shrink key, see
    :class:`~nebisect.search.space.Member`) and ``message`` its verdict's; ``members``
    every input set it covers, in evaluation order; ``cliffs`` the cliffs localized for
    it (``run`` attaches them; an exploration lists its own in
    :attr:`Exploration.cliffs`). ``step``: for a stateful model judged over several
    predictions, the step at which ``smallest`` first failed (0: a model without state;
    left out of the JSON then).
    """

    json_form: ClassVar[Form] = Form(omit_defaults=("step",))

    target: str
    path: str
    signature: str
    attribution: str
    culprit: Culprit | None
    smallest: Member
    message: str = ""
    members: list[Member] = field(default_factory=list)
    cliffs: list[CliffFinding] = field(default_factory=list)
    step: int = 0

    @classmethod
    def starting(cls, key: GroupKey, attribution: str, culprit: Culprit | None,
                 member: Member, message: str, step: int = 0) -> FailureGroup:
        """A group of one failure: ``member``, whose verdict said ``message`` (at
        ``step``)."""
        return cls(key.target, key.path, key.signature, attribution, culprit, member,
                   message, [member], step=step)

    def add(self, member: Member, message: str, step: int = 0) -> None:
        """Count ``member`` in (once per label); it becomes the smallest when its shrink
        key is smaller."""
        if all(m.label != member.label for m in self.members):
            self.members.append(member)
        if (member.magnitude, member.label) < (self.smallest.magnitude, self.smallest.label):
            self.smallest, self.message, self.step = member, message, step

    @property
    def key(self) -> GroupKey:
        return GroupKey(self.target, self.signature, culprit_key(self.attribution, self.culprit),
                        self.path)

    @property
    def families(self) -> list[str]:
        return list(dict.fromkeys(m.family for m in self.members))


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
    groups: list[FailureGroup] = field(default_factory=list)
    cliffs: list[CliffFinding] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, default=float)

    @classmethod
    def from_json(cls, text: str) -> Exploration:
        return cls.from_dict(json.loads(text))

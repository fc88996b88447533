"""A precision finding beside torch at the same precision: Core ML's error, or the model's.

A ``precision`` finding says that an fp16 (or fp32) evaluation of the converted program
disagrees with the float64 reference. Some of these are the model's own conditioning,
not Core ML's: Wav2Vec2's feature extractor fed a constant waveform normalizes it by its
own variance (zero), and torch in float32 computes that as badly as the fp32 program
does. So for each failure group of a precision finding, torch runs the model at the
group's precision on the group's smallest trigger and on its other failing input sets
from the largest down (:data:`PEER_INPUTS` in all) — judged against the same float64
reference by the same oracle (:func:`nebisect.oracle.compare`), in the ULPs the
program's own comparisons count (:func:`judged_in`) — and the largest errors of both are
set side by side (:class:`TorchPeer`, :func:`worst_pair`). The largest, not the
trigger's alone: a trigger localized at a cliff's edge is where the program has just
crossed the tolerance, which torch, rounding in another order, may not have yet
(Wav2Vec2's constant waveform of 0.0011: Core ML 8.7e-5, torch fp32 1.4e-5; at 1.0:
0.064 and 0.027).

* The precision is the target's: an fp16 target is compared with ``torch:cpu:fp16`` when
  torch runs the model in half on the CPU, else with ``torch:cpu:fp32`` (a model whose
  ops torch has no half kernel for is "not comparable" in fp16, said once in the
  report's :attr:`~nebisect.detect.matrix.RunReport.torch_note`, never a crash); an fp32
  target with ``torch:cpu:fp32``. A torch target that is the run's reference (a model
  that pins float32) is never its own peer.
* **As bad** — Core ML's error at most :data:`AS_BAD_FACTOR` times torch's, in ULPs of
  the same precision, or torch returning inf/NaN there too: the finding is a note, not a
  failure (``torch fp32 computes it as badly: max error X vs Core ML's Y``).
* **Worse** — the finding stays, and its title says by how much (``N× torch fp16's
  error``; ``inf/NaN where torch fp16 stays finite`` when only the program returns
  inf/NaN).

A finding becomes a note only when every one of its groups is a precision failure as bad
as torch's: a group a device or the converter explains, or one torch could not be
compared with, keeps the finding.

4× (``bench/rounding_order.py``): two correct fp32 implementations of one ill-conditioned
computation differ by the order in which they round. A constant row centred by its own
mean and divided by ``sqrt(var + 1e-5)`` — exactly 0 in float64 — by numpy's pairwise
sum (the simulator's ``reduce_mean``) and by torch's own: of 520 (length, constant)
rows, 185 leave a residue in both, the larger within 2× of the smaller in 95% of them and
within 4× in all. The published precision bugs lie orders of magnitude beyond torch at the same
precision and stay findings: Llama's RMSNorm 2,599× torch fp16's error (Hugging Face
upcasts to float32 inside, so torch fp16 is exact to its rounding where Core ML's fp16
squares overflow), log_softmax's ``-inf`` where torch fp16 stays finite.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from nebisect.codec import Record
from nebisect.detect.causes import RunFinding
from nebisect.detect.titles import MESSAGE_CHARS
from nebisect.evaluate.judge import evaluate
from nebisect.evaluate.workbench import Workbench
from nebisect.search.records import FailureGroup
from nebisect.targets.registry import spec_of
from nebisect.targets.spec import TargetSpec
from nebisect.verdict import Comparison, Status, Verdict

#: how many times torch's error (at the same precision, in its ULPs) Core ML's may be
#: and still be the model's own conditioning
AS_BAD_FACTOR = 4.0
#: the torch targets a program target of each precision is compared with, in order of
#: preference (the first that runs the model)
PEERS = {"fp16": (TargetSpec("torch", "cpu", "fp16"), TargetSpec("torch", "cpu", "fp32")),
         "bf16": (TargetSpec("torch", "cpu", "bf16"), TargetSpec("torch", "cpu", "fp32")),
         "fp32": (TargetSpec("torch", "cpu", "fp32"),)}
#: comparison kinds that measure no error: the output is inf or NaN
NO_ERROR_KINDS = ("nonfinite", "nan-suppressed")
#: the attribution this module judges
JUDGED_ATTRIBUTION = "precision"
#: how many of a failure group's input sets torch runs on: its smallest trigger, then
#: the largest (a cliff's edge alone says little: the program has just crossed the
#: tolerance there)
PEER_INPUTS = 6


@dataclass
class TorchPeer(Record):
    """One precision failure group's program beside torch at the same precision, over
    input sets the group fails at (``inputs``: their labels, its smallest trigger first):
    the program's worst comparison there (``program``) and torch's (``peer``), both
    judged by the oracle in ``precision``'s ULPs (:func:`worst_pair`)."""

    target: str
    path: str
    signature: str
    inputs: list[str]
    torch: str
    precision: str
    program: Comparison
    peer: Comparison

    @property
    def ratio(self) -> float:
        """How many times torch's error the program's is (see :func:`error_ratio`)."""
        return error_ratio(self.program, self.peer)

    @property
    def as_bad(self) -> bool:
        """Is the program's error no worse than torch's (within :data:`AS_BAD_FACTOR`)?"""
        return self.ratio <= AS_BAD_FACTOR

    @property
    def torch_words(self) -> str:
        """``torch fp16``: the peer as the text names it."""
        return f"torch {spec_of(self.torch).precision}"

    def matches(self, group: FailureGroup) -> bool:
        return (self.target, self.path, self.signature, self.inputs[0]) == (
            group.target, group.path, group.signature, group.smallest.label)

    def describe(self) -> str:
        """What torch at the same precision computes there, beside the program."""
        torch, program, peer = self.torch_words, self.program, self.peer
        count = len(self.inputs)
        where = "at its trigger" if count == 1 else f"over {count} of its failing input sets"
        if program.kind in NO_ERROR_KINDS:
            return (f"{torch} returns inf/NaN {where} too" if peer.kind in NO_ERROR_KINDS else
                    f"inf/NaN where {torch} stays finite (max error "
                    f"{peer.max_abs_error:.3g} {where})")
        if peer.kind in NO_ERROR_KINDS:
            return (f"{torch} returns inf/NaN {where}, where Core ML is off by at most "
                    f"{program.max_abs_error:.3g}")
        said = (f"max error {peer.max_abs_error:.3g} vs Core ML's "
                f"{program.max_abs_error:.3g} {where}")
        if self.as_bad:
            return (f"{torch} computes it as badly: {said} ({self.ratio:.2g}× in "
                    f"{self.precision} ULPs)")
        return f"{_times(self.ratio)} {torch}'s error ({said})"


def error_ratio(program: Comparison, peer: Comparison) -> float:
    """How many times ``peer``'s error ``program``'s is, in ULPs of the precision both
    were judged in: 1 when both return inf/NaN, 0 when only torch does, inf when only
    the program does (or torch is exact where the program is not)."""
    if program.kind in NO_ERROR_KINDS or peer.kind in NO_ERROR_KINDS:
        return {(True, True): 1.0, (False, True): 0.0}.get(
            (program.kind in NO_ERROR_KINDS, peer.kind in NO_ERROR_KINDS), math.inf)
    if peer.max_ulp_error == 0:
        return math.inf if program.max_ulp_error > 0 else 1.0
    return program.max_ulp_error / peer.max_ulp_error


def judged_in(verdict: Verdict) -> str:
    """The precision whose ULPs ``verdict``'s comparisons count ("" when it measured
    none): the target's, or the one its case is judged in (an fp32 program whose
    outputs are fp16 is judged in fp16)."""
    measured = verdict.error_metrics.comparisons if verdict.error_metrics else []
    return next((c.precision for c in measured if c.precision), "")


def paired(program: Verdict, peer: Verdict) -> list[tuple[Comparison, Comparison]]:
    """Each output the program fails at, with torch's comparison of it (none when torch
    returned no such output)."""
    if program.error_metrics is None or peer.error_metrics is None:
        return []
    theirs = {c.name: c for c in peer.error_metrics.comparisons}
    return [(c, theirs[c.name]) for c in program.error_metrics.comparisons
            if not c.passed and c.name in theirs]


def worst_pair(pairs: Sequence[tuple[Comparison, Comparison]]) -> tuple[Comparison, Comparison]:
    """The program's worst comparison over ``pairs`` and torch's beside it: an inf/NaN
    torch does not share, if there is one; else, when the program's every failure is an
    inf/NaN torch shares, one of those; else the program's largest error (in ULPs) and
    torch's largest where the program's is finite — an inf/NaN of torch's first. The
    largest against the largest: at a cliff's edge the program has just crossed the
    tolerance where torch may not have, deeper in they show how each computes it."""
    unshared = [(p, t) for p, t in pairs
                if p.kind in NO_ERROR_KINDS and t.kind not in NO_ERROR_KINDS]
    finite = [(p, t) for p, t in pairs if p.kind not in NO_ERROR_KINDS]
    if unshared or not finite:
        return (unshared or list(pairs))[0]
    program = max((p for p, _ in finite), key=lambda c: c.max_ulp_error)
    theirs = [t for _, t in finite]
    peer = next((t for t in theirs if t.kind in NO_ERROR_KINDS), None) or max(
        theirs, key=lambda c: c.max_ulp_error)
    return program, peer


def shared_with_torch(finding: RunFinding, peers: Sequence[TorchPeer]) -> bool:
    """Is ``finding`` the model's own conditioning: every group a precision failure whose
    peer is as bad?"""
    return all(group.attribution == JUDGED_ATTRIBUTION and any(
        peer.matches(group) and peer.as_bad for peer in peers) for group in finding.groups)


def peer_of(finding: RunFinding, peers: Sequence[TorchPeer]) -> TorchPeer | None:
    """The peer of the finding's group that compares worst (None: none compared)."""
    own = [peer for peer in peers if any(peer.matches(g) for g in finding.groups)]
    return max(own, key=lambda peer: peer.ratio, default=None)


def worse_words(finding: RunFinding, peers: Sequence[TorchPeer]) -> str:
    """What a precision finding's title adds: by how much Core ML is worse than torch
    at the same precision (``""``: no peer, or none worse)."""
    peer = peer_of(finding, peers)
    return f"; {peer.describe()}" if peer is not None and not peer.as_bad else ""


def note_line(finding: RunFinding, peers: Sequence[TorchPeer]) -> str:
    """One line for a finding torch shares at the same precision: a note, not a
    failure."""
    peer = peer_of(finding, peers)
    said = peer.describe() if peer is not None else ""
    return (f"note: {finding.title} — {said}; the model's own conditioning at this "
            "precision, not a failure")


def _times(ratio: float) -> str:
    return "∞×" if math.isinf(ratio) else f"{ratio:,.0f}×" if ratio >= 10 else f"{ratio:.2g}×"


def compared_inputs(group: FailureGroup) -> list[str]:
    """The labels of the input sets torch runs on for ``group``: its smallest trigger,
    then its other failing input sets from the largest down (at most
    :data:`PEER_INPUTS`)."""
    others = sorted((m for m in group.members if m.label != group.smallest.label),
                    key=lambda m: (-m.magnitude, m.label))
    return [group.smallest.label, *(m.label for m in others)][:PEER_INPUTS]


@dataclass
class TorchPeers:
    """Runs torch at the precision of a run's precision failure groups, on the input
    sets they fail at, each evaluation in an isolated child like every torch evaluation
    and cached by (torch target, precision, inputs file)."""

    bench: Workbench
    #: torch targets that could not run the model, with why (each said once)
    cannot: dict[TargetSpec, str] = field(default_factory=dict)
    _verdicts: dict[tuple[TargetSpec, str, str], Verdict] = field(default_factory=dict)

    def compare(self, findings: Iterable[RunFinding]) -> list[TorchPeer]:
        """A peer for each precision group of the precision ``findings`` (none for a
        package source: torch has no module to run)."""
        if not self.bench.source.ref.is_torch:
            return []
        groups = [group for finding in findings if finding.attribution == JUDGED_ATTRIBUTION
                  for group in finding.groups if group.attribution == JUDGED_ATTRIBUTION]
        return [peer for group in groups if (peer := self.peer(group)) is not None]

    def peer(self, group: FailureGroup) -> TorchPeer | None:
        """Torch beside ``group``'s program on :func:`compared_inputs`, at the first torch
        target of its precision that runs the model on its trigger, judged in the ULPs
        the program's trigger was (None: none runs it, or nothing compares)."""
        spec = spec_of(group.target)
        files = {label: self.bench.saved[label] for label in compared_inputs(group)
                 if label in self.bench.saved}
        if group.smallest.label not in files or not spec.runs_programs:
            return None
        programs = {label: self.bench.evaluate_cell(spec, group.path, npz)[0]
                    for label, npz in files.items()}
        precision = judged_in(programs[group.smallest.label]) or spec.precision
        trigger = files[group.smallest.label]
        torch = next((t for t in PEERS.get(spec.precision, ()) if t != self.bench.reference
                      and self.evaluate(t, precision, trigger) is not None), None)
        pairs = {label: paired(programs[label], verdict) for label, npz in files.items()
                 if torch is not None
                 and (verdict := self.evaluate(torch, precision, npz)) is not None}
        compared = [label for label, found in pairs.items() if found]
        if torch is None or not compared:
            return None
        return TorchPeer(group.target, group.path, group.signature, compared, str(torch),
                         precision, *worst_pair([pair for label in compared
                                                 for pair in pairs[label]]))

    def evaluate(self, torch: TargetSpec, precision: str, npz: str) -> Verdict | None:
        """torch's verdict on ``npz`` judged in ``precision``'s ULPs (None, and the
        reason kept in :attr:`cannot`, when it cannot run the model)."""
        key = (torch, precision, npz)
        if key not in self._verdicts:
            case = self.bench.case(torch, "", npz)
            case = replace(case, options=replace(case.options, judge_precision=precision))
            outcome = evaluate(case, reference=str(self.bench.reference),
                               isolator=self.bench.isolator,
                               timeout=self.bench.timeouts.predict,
                               reference_cache=str(self.bench.workdir / "references"))
            self._verdicts[key] = outcome.verdict
        verdict = self._verdicts[key]
        if verdict.status in (Status.PASS, Status.MISMATCH):
            return verdict
        self.cannot.setdefault(torch, verdict.message or verdict.signature)
        return None

    def note(self) -> str:
        """The torch targets that could not run the model, each said once with why
        (``""``: none): the findings of their precision were compared with the next
        torch target that could, which each comparison names."""
        return "; ".join(f"not comparable with {t}: torch cannot run this model in "
                         f"{t.precision} ({_first_line(why)})"
                         for t, why in self.cannot.items())


def _first_line(message: str) -> str:
    line = message.strip().splitlines()[0] if message.strip() else ""
    return line if len(line) <= MESSAGE_CHARS else line[:MESSAGE_CHARS - 1] + "…"

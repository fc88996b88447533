"""Generic reduction algorithms: ddmin (flat and hierarchical) and the evaluator, budget
and records they share with first-divergence search (:mod:`nebisect.search.divergence`).

Everything here works on opaque *units* (op names, FX nodes, submodules) and knows
nothing of models, files or processes. The caller injects:

* ``test(units) -> signature`` — materializes the candidate made of ``units``, runs it in
  isolation and returns the failure signature, ``None`` for a pass, or any verdict-like
  object with ``.failed`` and ``.signature`` (a :class:`nebisect.verdict.Verdict`);
* ``key(units) -> str`` — the content key of the materialized candidate (e.g. the
  sha256 of the extracted program and its inputs) under which results are cached, so the
  same bytes are never run twice even when two unit lists materialize identically;
* ``cache`` — any mutable mapping ``key -> signature | None`` (a dict, or a persistent
  store shared between runs);
* ``stop(stats) -> reason | None`` — consulted before every real evaluation (evaluation
  budget, deadline, Ctrl-C: see :class:`Budget`). A stopped algorithm does not raise: it
  returns the best (smallest interesting) candidate found so far, marked incomplete.

**Pass contract** (what every algorithm promises, after picire's ``DD`` and Hypothesis'
shrinker): a candidate is *accepted* only if it is interesting — it fails with exactly
the signature of the original failure: a candidate that passes, or
fails in another way, is rejected, so a model with two bugs stays on the one it started
from. Acceptance is re-checked ``confirm`` times with fresh, uncached evaluations, so a
flaky test can cost reduction but rarely steer it; every accepted candidate is strictly
smaller than the one it replaces, hence the algorithms terminate whatever the test says.
The returned units are always interesting (the original itself in the worst case) and
keep the caller's order.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Hashable, Iterable, MutableMapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from nebisect.codec import Form, Record

U = TypeVar("U", bound=Hashable)


def signature_of(result: Any) -> str | None:
    """Normalize what a test returned: ``None``/a signature string/a verdict-like object."""
    if result is None or isinstance(result, str):
        return result
    return str(result.signature) if result.failed else None


class ReductionError(Exception):
    """The reduction cannot start (e.g. the original candidate does not fail)."""


class ReductionStopped(Exception):
    """Raised inside an algorithm when the stop condition fires; the algorithms (these and
    :func:`~nebisect.search.divergence.locate_divergence`) catch it, so it never reaches
    their callers.

    ``best`` is the smallest interesting candidate the interrupted pass had reached."""

    best: list[Any] | None = None


@dataclass
class PredicateCall:
    """One call of the injected test (or one cache hit), for the record and progress."""

    seq: int
    size: int
    key: str
    signature: str | None
    cached: bool = False
    confirmation: bool = False


@dataclass
class Stats(Record):
    """The cost of a reduction: real evaluations, cache hits, re-checks and why it stopped
    (its JSON leaves out the start time, a monotonic clock reading)."""

    json_form: ClassVar[Form] = Form(skipped=("started",))

    evaluations: int = 0
    cache_hits: int = 0
    confirmations: int = 0
    flaky: int = 0
    stopped: str | None = None
    started: float = field(default_factory=time.monotonic)
    log: list[PredicateCall] = field(default_factory=list)


Stop = Callable[[Stats], str | None]


class Budget:
    """The usual stop condition: at most ``max_evals`` evaluations, ``timeout`` seconds,
    or until :meth:`interrupt` is called (from a SIGINT handler, say)."""

    def __init__(
        self,
        max_evals: int | None = None,
        timeout: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_evals = max_evals
        self.clock = clock
        self.deadline = None if timeout is None else clock() + timeout
        self.interrupted = False

    def interrupt(self) -> None:
        self.interrupted = True

    def __call__(self, stats: Stats) -> str | None:
        if self.interrupted:
            return "interrupted"
        if self.max_evals is not None and stats.evaluations >= self.max_evals:
            return f"evaluation budget of {self.max_evals} spent"
        if self.deadline is not None and self.clock() >= self.deadline:
            return "deadline reached"
        return None


class Evaluator(Generic[U]):
    """The injected test wrapped with the cache, the stop condition and re-checks.

    One evaluator is shared by the passes of one reduction so that the statistics and
    the cache cover all of them. A ``KeyboardInterrupt`` raised while the test runs is
    treated as a stop, so Ctrl-C still yields the best result so far.
    """

    def __init__(
        self,
        test: Callable[[list[U]], Any],
        *,
        key: Callable[[list[U]], str] | None = None,
        cache: MutableMapping[str, str | None] | None = None,
        stop: Stop | None = None,
        confirm: int = 1,
        observer: Callable[[PredicateCall, Stats], None] | None = None,
    ) -> None:
        self._test = test
        self._key = key or (lambda units: repr(list(units)))
        self.cache: MutableMapping[str, str | None] = {} if cache is None else cache
        self._stop = stop
        self.confirm = confirm
        self._observer = observer
        self._confirmed: set[str] = set()
        self.stats = Stats()

    def signature(self, units: Sequence[U]) -> str | None:
        """The candidate's signature, from the cache when its key was seen before."""
        candidate = list(units)
        key = self._key(candidate)
        if key in self.cache:
            self.stats.cache_hits += 1
            self._record(PredicateCall(len(self.stats.log), len(candidate), key,
                                    self.cache[key], cached=True))
            return self.cache[key]
        signature = self._run(candidate, key, confirmation=False)
        self.cache[key] = signature
        return signature

    def interesting(self, units: Sequence[U], expected: str) -> bool:
        """True iff the candidate fails with ``expected``, re-checked ``confirm`` times."""
        candidate = list(units)
        if self.signature(candidate) != expected:
            return False
        key = self._key(candidate)
        if key in self._confirmed:
            return True
        for _ in range(self.confirm):
            again = self._run(candidate, key, confirmation=True)
            if again != expected:
                self.stats.flaky += 1
                self.cache[key] = again
                return False
        self._confirmed.add(key)
        return True

    def _run(self, candidate: list[U], key: str, *, confirmation: bool) -> str | None:
        reason = self._stop(self.stats) if self._stop else None
        if reason:
            self.stats.stopped = reason
            raise ReductionStopped(reason)
        try:
            signature = signature_of(self._test(candidate))
        except KeyboardInterrupt:
            self.stats.stopped = "interrupted"
            raise ReductionStopped("interrupted") from None
        self.stats.evaluations += 1
        self.stats.confirmations += confirmation
        self._record(PredicateCall(len(self.stats.log), len(candidate), key, signature,
                                confirmation=confirmation))
        return signature

    def _record(self, evaluation: PredicateCall) -> None:
        self.stats.log.append(evaluation)
        if self._observer:
            self._observer(evaluation, self.stats)


@dataclass
class Reduction(Record, Generic[U]):
    """The result of a pass: interesting units, and whether the pass ran to its end
    (for ddmin, ``complete`` means the result is 1-minimal); its JSON lists the stats
    last."""

    json_form: ClassVar[Form] = Form(order=("units", "signature", "complete", "strategy"))

    units: list[U]
    signature: str
    stats: Stats
    complete: bool
    strategy: str

    @property
    def stopped(self) -> str | None:
        return self.stats.stopped


def _split(atoms: list[list[U]], parts: int) -> list[list[list[U]]]:
    """``parts`` contiguous, nearly equal chunks (contiguity keeps graph cuts small)."""
    bounds = [len(atoms) * i // parts for i in range(parts + 1)]
    return [atoms[a:b] for a, b in itertools.pairwise(bounds) if b > a]


def _flat(atoms: Iterable[list[U]]) -> list[U]:
    return [u for atom in atoms for u in atom]


def ddmin(
    units: Sequence[U], evaluator: Evaluator[U], signature: str | None = None
) -> Reduction[U]:
    """Zeller's ddmin: a 1-minimal interesting subset of ``units``.

    At granularity n the current candidate is cut into n chunks; each chunk is tried
    alone (reduce to subset, back to n = 2), then each complement (remove one chunk,
    n - 1); when neither is interesting, n doubles, until n equals the candidate's
    size — then no single unit can be removed: the result is 1-minimal. ``signature``
    is the original failure's; when omitted, the full ``units`` are evaluated for it.
    """
    return hierarchical_ddmin(units, evaluator, (), signature)


def hierarchical_ddmin(
    units: Sequence[U],
    evaluator: Evaluator[U],
    levels: Sequence[Callable[[U], Hashable]],
    signature: str | None = None,
) -> Reduction[U]:
    """ddmin over a hierarchy, coarse to fine, then over single units (after HDD,
    Misherghi & Su, ICSE 2006).

    Each level maps a unit to its group (e.g. the submodule an FX node belongs to at
    depth 1, 2, …); a pass keeps or drops whole groups of the current candidate — "strip
    wrapper pieces" — before the next, finer level looks inside the survivors. A group
    is contiguous in the caller's order only if the hierarchy says so; candidates are
    always evaluated as plain unit lists in the caller's order, so the cache and the
    stop condition span all passes. The last pass is plain ddmin, hence the result is
    1-minimal over units when the reduction completes.
    """
    current = list(units)
    strategy = "hierarchical-ddmin" if levels else "ddmin"
    try:
        if signature is None:
            signature = evaluator.signature(current)
            if signature is None:
                raise ReductionError("the original candidate does not fail")
        for level in (*levels, None):
            groups: dict[Hashable, list[U]] = {}
            for index, unit in enumerate(current):
                groups.setdefault(index if level is None else level(unit), []).append(unit)
            if len(groups) > 1:
                current = _ddmin_atoms(list(groups.values()), evaluator, signature)
    except ReductionStopped as stopped:
        best = stopped.best if stopped.best is not None else current
        return Reduction(best, signature or "", evaluator.stats, False, strategy)
    return Reduction(current, signature, evaluator.stats, True, strategy)


def _ddmin_atoms(
    atoms: list[list[U]], evaluator: Evaluator[U], signature: str
) -> list[U]:
    """ddmin over atoms; a stop carries the best candidate reached so far."""
    current = atoms
    chunks = _split(current, 2)
    try:
        while len(current) > 1:
            reduced = next(
                (c for c in chunks if evaluator.interesting(_flat(c), signature)), None
            )
            if reduced is not None:
                current, chunks = reduced, _split(reduced, 2)
                continue
            if len(chunks) > 2:
                index = _removable_chunk(chunks, evaluator, signature)
                if index is not None:
                    chunks = chunks[:index] + chunks[index + 1:]
                    current = [a for c in chunks for a in c]
                    continue
            if len(chunks) >= len(current):
                break
            chunks = _split(current, min(len(current), 2 * len(chunks)))
    except ReductionStopped as stopped:
        stopped.best = _flat(current)
        raise
    return _flat(current)


def _removable_chunk(
    chunks: list[list[list[U]]], evaluator: Evaluator[U], signature: str
) -> int | None:
    for index in range(len(chunks)):
        complement = [u for i, c in enumerate(chunks) if i != index for u in _flat(c)]
        if evaluator.interesting(complement, signature):
            return index
    return None

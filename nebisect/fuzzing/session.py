"""A fuzz session: which ops, on which target, with how many workers; the CLI calls this.

It turns op names into :class:`~nebisect.fuzzing.subject.OpSubject` campaigns, spreads
them over ``jobs`` worker threads (each with its own isolator — the parent only waits on
child processes, so threads are enough — in the pool that ``replay`` uses too), merges
the results in a fixed order and writes every finding to the corpus. With more workers
than ops, one op's budget is split into shards with derived seeds; the merge keeps the
first shard's finding per key, so a given (seed, jobs) always gives the same findings.

On a cluster (:meth:`Session.run` on a remote runner) each shard is one ``fuzz`` unit:
its op, budget, seed and options as JSON, its ``.py`` plugins as files. The worker
runs exactly the campaign a local thread would (:func:`run_campaign`, same seed) and
returns its :class:`CampaignResult` as JSON; the merge is the same, in unit order, so
``--seed S --jobs N`` finds the same over a fleet as here. A shard that came back
with nothing (its workers died twice) leaves its op ``interrupted`` and its reason in
:attr:`Session.lost`.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from nebisect.bounds import MAX_JOBS, check_count, check_seed
from nebisect.codec import encode
from nebisect.errors import NebisectError
from nebisect.executors import Unit, UnitResult
from nebisect.executors.runner import Runner, using
from nebisect.fuzzing.campaign import (
    Campaign,
    CampaignConfig,
    CampaignProgress,
    CampaignResult,
    Evaluation,
    Subject,
)
from nebisect.fuzzing.execute import SubjectEvaluator
from nebisect.fuzzing.subject import OpSubject
from nebisect.isolate import Isolator
from nebisect.isolation.timeouts import Timeouts
from nebisect.opspecs.ops import OpSpec, get_op, registered_ops
from nebisect.targets.plugins import absolute_plugin, use_plugins
from nebisect.targets.registry import get_target, spec_of
from nebisect.targets.spec import REFERENCE_TARGET

#: A fuzz case is one small op: a minute is long for it.
FUZZ_TIMEOUTS = Timeouts(predict=60.0)


def default_target() -> str:
    """The main-job target: the real Neural Engine on a Mac, its simulator elsewhere."""
    return "coreml:ne" if sys.platform == "darwin" else "sim:ane"


@dataclass
class FuzzOptions:
    target: str = field(default_factory=default_target)
    budget: int = 200
    seed: int = 0
    jobs: int = 1
    wrap: str = "none"
    isolation: str = "persistent"
    reference: str = REFERENCE_TARGET
    plugins: tuple[str, ...] = ()
    shrink_budget: int = 100
    cliff: bool = True
    timeouts: Timeouts = FUZZ_TIMEOUTS
    #: bytes each isolated case may use (``--memory``; None: the machine default)
    memory: int | None = None

    def __post_init__(self) -> None:
        # Resolved once, here: every child imports the same file whatever its cwd.
        self.plugins = tuple(absolute_plugin(p) for p in self.plugins)
        check_count(f"--budget {self.budget}", self.budget)
        check_count(f"--jobs {self.jobs}", self.jobs, MAX_JOBS)
        check_count(f"--shrink-budget {self.shrink_budget}", self.shrink_budget, least=0)
        check_seed(f"--seed {self.seed}", self.seed)


@dataclass
class _Unit:
    """One campaign: an op, its share of the budget and its seed."""

    index: int
    spec: OpSpec
    budget: int
    seed: int


def resolve_ops(names: list[str]) -> list[OpSpec]:
    """``["all"]`` → every registered op; else each name looked up (unknown → error)."""
    if names == ["all"]:
        return list(registered_ops().values())
    return [get_op(name) for name in dict.fromkeys(names)]


def unsupported(spec: OpSpec, reference: str) -> str:
    """Why ``spec`` cannot be judged against a simulator reference here ('' if it can)."""
    if not reference or not spec_of(reference).simulated:
        return ""
    from nebisect.mil.kernels import kernel_ops

    if spec.op_type not in kernel_ops():
        return f"the simulator has no kernel for {spec.op_type} (the {reference} oracle needs one)"
    return ""


def dtype_for(target: str) -> str:
    """Programs are declared in the precision the target computes in (fp16 or fp32)."""
    return "fp16" if spec_of(target).precision in ("fp16", "bf16") else "fp32"


def check_target(options: FuzzOptions) -> None:
    """A target that cannot run here is a one-line error before any work starts.

    The plugins are described in isolated children (never imported here); the target
    they register is looked up from that description.
    """
    use_plugins(options.plugins, timeout=options.timeouts.load)
    reason = get_target(options.target).availability()
    if reason:
        raise NebisectError(f"target {options.target} is unavailable here: {reason}")


def shards(options: FuzzOptions, subjects: int = 1) -> list[tuple[int, int]]:
    """(budget, seed) of each shard of one subject's campaign: with more jobs than
    subjects the budget is split, each shard seeded from ``--seed`` and its index."""
    count = max(1, options.jobs // max(subjects, 1))
    parts = []
    for shard in range(count):
        budget = options.budget // count + (1 if shard < options.budget % count else 0)
        seed = options.seed if count == 1 else options.seed * 1009 + shard
        if budget:
            parts.append((budget, seed))
    return parts


def _units(specs: list[OpSpec], options: FuzzOptions) -> list[_Unit]:
    units: list[_Unit] = []
    for spec in specs:
        for budget, seed in shards(options, len(specs)):
            units.append(_Unit(len(units), spec, budget, seed))
    return units


class Session:
    """One fuzz session: its ops, their campaigns, and what they found so far.

    :meth:`run` fuzzes; :meth:`results` is the merged result per op at any time — all of
    it once :meth:`run` returned; after an interruption, the finished campaigns plus
    what the stopped ones had found (``interrupted`` set), which is what a cancelled CI
    job still wants stored and reported.
    """

    def __init__(self, names: list[str], options: FuzzOptions) -> None:
        check_target(options)
        self.options = options
        self.specs = resolve_ops(names)
        self.skipped = {s.name: unsupported(s, options.reference) for s in self.specs}
        self.units = _units([s for s in self.specs if not self.skipped[s.name]], options)
        self._campaigns: dict[int, CampaignResult] = {}
        self.lost: list[str] = []

    def run(self, runner: Runner,
            on_progress: Callable[[int, CampaignProgress], None] | None = None,
            ) -> list[CampaignResult]:
        """Fuzz each op on the command's ``runner``; one merged :class:`CampaignResult`
        per op, in the order given.

        ``on_progress(unit, progress)`` is called from worker threads; ``unit`` numbers
        the campaigns (one per op and shard) so a display can sum them. On a cluster
        each campaign is a unit, and ``on_progress`` then sees each one as it ends;
        here campaigns run on the runner's threads (cancelled at once on an
        interruption).
        """
        if runner.remote:
            self._run_units(runner, on_progress)
        else:
            runner.map(self.units, functools.partial(self._run_unit, on_progress=on_progress))
        return self.results()

    def results(self) -> list[CampaignResult]:
        options, results = self.options, []
        for spec in self.specs:
            if self.skipped[spec.name]:
                results.append(CampaignResult(spec.name, options.seed, 0,
                                              skipped=self.skipped[spec.name]))
                continue
            units = [u for u in self.units if u.spec.name == spec.name]
            parts = [self._campaigns[u.index] for u in units if u.index in self._campaigns]
            merged = merge(parts or [CampaignResult(spec.name, options.seed, 0)],
                           options.seed, options.budget)
            merged.interrupted = merged.interrupted or len(parts) < len(units)
            results.append(merged)
        return results

    def _run_unit(
        self,
        unit: _Unit,
        isolator: Isolator,
        on_progress: Callable[[int, CampaignProgress], None] | None = None,
    ) -> None:
        report = functools.partial(on_progress, unit.index) if on_progress else None
        run_campaign(unit, self.options, isolator, report,
                     functools.partial(self._campaigns.__setitem__, unit.index))

    def _run_units(self, runner: Runner,
                   on_progress: Callable[[int, CampaignProgress], None] | None) -> None:
        options = wire_options(self.options)
        units = [Unit("fuzz", encode(OpShard(u.spec.name, u.index, u.budget, u.seed, options)),
                      paths=[p.lstrip("/") for p in self.options.plugins if p.endswith(".py")],
                      root=WIRE_ROOT, label=f"{u.spec.name}#{u.index}")
                 for u in self.units]

        def finished(index: int, result: UnitResult) -> None:
            unit = self.units[index]
            received(result, f"{unit.spec.name} shard {index}", unit.index, self._campaigns,
                     self.lost, on_progress)

        runner.map_units(units, finished)


def received(result: UnitResult, label: str, index: int,
             campaigns: dict[int, CampaignResult], lost: list[str],
             on_progress: Callable[[int, CampaignProgress], None] | None) -> None:
    """A campaign shard a unit returned, stored as ``campaigns[index]`` and shown done;
    a unit no attempt finished leaves its reason in ``lost`` instead (its subject is
    then ``interrupted``)."""
    if result.value is None:
        lost.append(f"{label}: {result.error}")
        return
    campaign = campaigns[index] = CampaignResult.from_dict(result.value)
    if on_progress is not None:
        on_progress(index, CampaignProgress(
            campaign.subject, "done", campaign.generated, campaign.evaluations,
            len(campaign.findings), campaign.elapsed))


#: files a fuzz unit ships (``.py`` plugins, a model's source) travel named by their
#: absolute path below this root
WIRE_ROOT = Path("/")


def wire_options(options: FuzzOptions) -> dict[str, Any]:
    """``options`` as a unit's JSON (one job: a unit is one shard)."""
    body = asdict(replace(options, jobs=1))
    body["timeouts"] = asdict(options.timeouts)
    return body


def options_from_wire(wired: dict[str, Any], root: Path) -> FuzzOptions:
    """The options a unit carries (:func:`wire_options`), its ``.py`` plugins read from
    the unit's files under ``root`` (on a worker, the copies shipped with the unit;
    locally, ``root`` is ``/`` and they are where they were); checked as the command
    checks them."""
    body = dict(wired)
    body["timeouts"] = Timeouts(**body["timeouts"])
    body["plugins"] = tuple(str(root / p.lstrip("/")) if p.endswith(".py") else p
                            for p in body["plugins"])
    options = FuzzOptions(**body)
    check_target(options)
    return options


@dataclass(frozen=True)
class OpShard:
    """A ``fuzz`` unit's arguments: one campaign (its op, index, budget and seed) and the
    session's options as :func:`wire_options` writes them — a JSON object, since its
    ``.py`` plugins are checked only once :func:`options_from_wire` has found them
    under the unit's root."""

    op: str
    index: int
    budget: int
    seed: int
    options: dict[str, Any]


def fuzz_unit(shard: OpShard, root: Path, workdir: Path,
              isolator: Isolator) -> dict[str, Any]:
    """Handler of ``fuzz`` units: one campaign shard, as a local thread would run it."""
    options = options_from_wire(shard.options, root)
    unit = _Unit(shard.index, get_op(shard.op), shard.budget, shard.seed)
    return run_campaign(unit, options, isolator).to_dict()


def run_campaign(
    unit: _Unit,
    options: FuzzOptions,
    isolator: Isolator,
    report: Callable[[CampaignProgress], None] | None = None,
    started: Callable[[CampaignResult], None] | None = None,
) -> CampaignResult:
    """One shard's campaign; ``started`` gets its live result before it runs (what an
    interrupted session still reports)."""
    subject = OpSubject(unit.spec, dtype_for(options.target), options.wrap)
    evaluator = SubjectEvaluator(subject, options.target, isolator, reference=options.reference,
                                 plugins=options.plugins, timeout=options.timeouts.predict)
    try:
        return drive(subject, evaluator, unit.budget, unit.seed, options, report, started)
    finally:
        evaluator.close()


def drive(
    subject: Subject,
    evaluate: Callable[[dict[str, Any]], Evaluation],
    budget: int,
    seed: int,
    options: FuzzOptions,
    report: Callable[[CampaignProgress], None] | None = None,
    started: Callable[[CampaignResult], None] | None = None,
) -> CampaignResult:
    """One campaign over ``subject`` with ``options``' shrink and cliff settings."""
    config = CampaignConfig(budget=budget, seed=seed, shrink_budget=options.shrink_budget,
                            cliff=options.cliff)
    campaign = Campaign(subject, evaluate, config, report)
    if started is not None:
        started(campaign.result)
    campaign.run()
    return campaign.result


def run_session(
    names: list[str],
    options: FuzzOptions,
    on_progress: Callable[[int, CampaignProgress], None] | None = None,
    runner: Runner | None = None,
) -> list[CampaignResult]:
    """Fuzz each op (see :meth:`Session.run`) on ``runner`` (default: one of the
    options' jobs and isolation mode, for this call)."""
    session = Session(names, options)
    with using(runner, options.jobs, options.isolation, options.memory) as running:
        return session.run(running, on_progress)


def merge(parts: list[CampaignResult], seed: int, budget: int) -> CampaignResult:
    """Shards of one op → one result; the first shard's finding wins for a shared key."""
    merged = CampaignResult(parts[0].subject, seed, budget)
    seen: dict[tuple[str, str], Any] = {}
    for part in parts:
        merged.interrupted = merged.interrupted or part.interrupted
        merged.generated += part.generated
        merged.evaluations += part.evaluations
        merged.runs += part.runs
        merged.elapsed = max(merged.elapsed, part.elapsed)
        for status, count in part.statuses.items():
            merged.statuses[status] = merged.statuses.get(status, 0) + count
        for finding in part.findings:
            if finding.key in seen:
                seen[finding.key].hits += finding.hits
            else:
                seen[finding.key] = finding
                merged.findings.append(finding)
    return merged

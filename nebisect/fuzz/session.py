"""A fuzz session: which ops, on which target, with how many workers; the CLI calls this.

It turns op names into :class:`~nebisect.fuzz.subject.OpSubject` campaigns, spreads
them over ``jobs`` worker threads (each with its own isolator — the parent only waits on
child processes, so threads are enough), merges the results in a fixed order and writes
every finding to the corpus. With more workers than ops, one op's budget is split into
shards with derived seeds; the merge keeps the first shard's finding per key, so a
given (seed, jobs) always gives the same findings.
"""

from __future__ import annotations

import functools
import queue
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nebisect.case import NebisectError
from nebisect.fuzz.campaign import Campaign, CampaignConfig, CampaignResult, Progress
from nebisect.fuzz.execute import Executor
from nebisect.fuzz.ops import OpSpec, get_op, registered_ops
from nebisect.fuzz.subject import OpSubject
from nebisect.isolate import Isolator
from nebisect.sources.plugins import absolute_plugin, use_plugins
from nebisect.targets import get_target, spec_of
from nebisect.timeouts import Timeouts

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
    reference: str = "sim:fp64"
    plugins: tuple[str, ...] = ()
    shrink_budget: int = 100
    cliff: bool = True
    timeouts: Timeouts = FUZZ_TIMEOUTS

    def __post_init__(self) -> None:
        # Resolved once, here: every child imports the same file whatever its cwd.
        self.plugins = tuple(absolute_plugin(p) for p in self.plugins)
        if self.budget < 1:
            raise NebisectError(f"--budget must be at least 1, got {self.budget}")
        if self.jobs < 1:
            raise NebisectError(f"--jobs must be at least 1, got {self.jobs}")


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
    if not reference.startswith("sim:"):
        return ""
    from nebisect.mil.kernels import registered_ops as kernel_ops

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


def _units(specs: list[OpSpec], options: FuzzOptions) -> list[_Unit]:
    shards = max(1, options.jobs // max(len(specs), 1))
    units: list[_Unit] = []
    for spec in specs:
        for shard in range(shards):
            budget = options.budget // shards + (1 if shard < options.budget % shards else 0)
            seed = options.seed if shards == 1 else options.seed * 1009 + shard
            if budget:
                units.append(_Unit(len(units), spec, budget, seed))
    return units


def run_session(
    names: list[str],
    options: FuzzOptions,
    on_progress: Callable[[int, Progress], None] | None = None,
    isolator: Isolator | None = None,
) -> list[CampaignResult]:
    """Fuzz each op; one merged :class:`CampaignResult` per op, in the order given.

    ``on_progress(unit, progress)`` is called from worker threads; ``unit`` numbers the
    campaigns (one per op and shard) so a display can sum them. An ``isolator`` given by
    the caller (warm, reused across sessions) serves a single-job session.

    One job runs in the calling thread. More run on worker threads that each start
    their own isolator: isolation helpers die with the thread that started them (the
    parent-death signal is per thread), so an isolator must stay with its thread.
    """
    check_target(options)
    specs = resolve_ops(names)
    skipped = {s.name: unsupported(s, options.reference) for s in specs}
    runnable = [s for s in specs if not skipped[s.name]]
    units = _units(runnable, options)
    if options.jobs == 1 or len(units) <= 1:
        outcomes = _run_here(units, options, on_progress, isolator)
    else:
        outcomes = _run_threads(units, options, on_progress)
    results = []
    for spec in specs:
        if skipped[spec.name]:
            results.append(CampaignResult(spec.name, options.seed, 0, skipped=skipped[spec.name]))
        else:
            parts = [outcomes[u.index] for u in units if u.spec.name == spec.name]
            results.append(merge(parts, options.seed, options.budget))
    return results


def _run_here(
    units: list[_Unit],
    options: FuzzOptions,
    on_progress: Callable[[int, Progress], None] | None,
    isolator: Isolator | None,
) -> dict[int, CampaignResult]:
    if isolator is not None:
        return {u.index: _run_unit(u, options, isolator, on_progress) for u in units}
    with Isolator(options.isolation) as own:
        return {u.index: _run_unit(u, options, own, on_progress) for u in units}


def _run_threads(
    units: list[_Unit],
    options: FuzzOptions,
    on_progress: Callable[[int, Progress], None] | None,
) -> dict[int, CampaignResult]:
    outcomes: dict[int, CampaignResult] = {}
    errors: list[BaseException] = []
    todo: queue.SimpleQueue[_Unit] = queue.SimpleQueue()
    for unit in units:
        todo.put(unit)

    def worker() -> None:
        with Isolator(options.isolation) as own:
            while not errors:
                try:
                    unit = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    outcomes[unit.index] = _run_unit(unit, options, own, on_progress)
                except BaseException as exc:
                    errors.append(exc)

    threads = [threading.Thread(target=worker, daemon=True)
               for _ in range(min(options.jobs, len(units)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return outcomes


def _run_unit(
    unit: _Unit,
    options: FuzzOptions,
    isolator: Isolator,
    on_progress: Callable[[int, Progress], None] | None,
) -> CampaignResult:
    subject = OpSubject(unit.spec, dtype_for(options.target), options.wrap)
    executor = Executor(subject, options.target, isolator, reference=options.reference,
                        plugins=options.plugins, timeout=options.timeouts.predict)
    config = CampaignConfig(budget=unit.budget, seed=unit.seed,
                            shrink_budget=options.shrink_budget, cliff=options.cliff)
    try:
        report = functools.partial(on_progress, unit.index) if on_progress else None
        return Campaign(subject, executor, config, report).run()
    finally:
        executor.close()


def merge(parts: list[CampaignResult], seed: int, budget: int) -> CampaignResult:
    """Shards of one op → one result; the first shard's finding wins for a shared key."""
    merged = CampaignResult(parts[0].subject, seed, budget)
    seen: dict[tuple[str, str], Any] = {}
    for part in parts:
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

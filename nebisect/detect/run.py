"""One run of a source over the target matrix: the work behind ``nebisect run``.

:func:`run` takes a checked :class:`RunOptions`, opens the runner (isolators and executor;
:func:`run_on` takes an open one), resolves the source, runs
:class:`~nebisect.detect.matrix.MatrixRunner` and returns the report with the inputs
files its rows were evaluated on. It prints nothing: progress
goes to the callable it is handed, rendering to :mod:`nebisect.detect.terminal` and
:class:`RunOutputs`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nebisect.case import REFERENCE_TARGET
from nebisect.detect import DEFAULT_BUDGET, DEFAULT_STEPS
from nebisect.errors import NebisectError
from nebisect.isolation.timeouts import Timeouts
from nebisect.sources.convert import PATHS
from nebisect.sources.domains import InputDomain
from nebisect.sources.inputs import DEFAULT_LENGTHS

if TYPE_CHECKING:
    from nebisect.detect.matrix import RunReport
    from nebisect.detect.triggers import TriggerIndex
    from nebisect.executors.runner import Runner

#: For torch sources the converted program is also run exactly: its row says whether
#: conversion preserved the math (and feeds the ``conversion`` attribution).
EXACT_ROW = REFERENCE_TARGET


@dataclass(frozen=True)
class RunOptions:
    """What a run evaluates, checked: the source as typed, the targets asked for, the
    oracle (``""``: the source's own), the inputs (an ``.npz``, else the ``lengths``),
    the conversion paths and how to convert, the plugins, the exploration (``explore``
    False: only the lengths or inputs), the process limits, the placement devices
    that fail closed (``require``) and the decode steps a stateful model is judged over
    (``steps``; a model without state is predicted once)."""

    source: str
    targets: tuple[str, ...]
    reference: str = ""
    inputs: Path | None = None
    lengths: tuple[int, ...] = DEFAULT_LENGTHS
    timeouts: Timeouts = field(default_factory=Timeouts)
    paths: tuple[str, ...] = PATHS
    converter_overrides: bool = False
    #: ``module:function`` calls made in the conversion child before converting (a
    #: user's own ``@register_torch_op`` converters), after nebisect's overrides
    converter_setup: tuple[str, ...] = ()
    deployment_target: str = ""
    plugins: tuple[str, ...] = ()
    explore: bool = True
    budget: int = DEFAULT_BUDGET
    families: list[str] | None = None
    seed: int = 0
    input_ranges: Mapping[str, InputDomain] = field(default_factory=dict)
    jobs: int = 1
    cluster: str | None = None
    require: tuple[str, ...] = ()
    steps: int = DEFAULT_STEPS

    @property
    def fixes(self) -> tuple[str, ...]:
        """The converter fixes the run converts with (``--converter-overrides``)."""
        from nebisect.fixes.converter_compat import ConverterCompat

        return (ConverterCompat.name,) if self.converter_overrides else ()


@dataclass
class RunOutcome:
    """A run's report and the inputs file of each input set it evaluated, by label."""

    report: RunReport
    inputs_files: Mapping[str, str]


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP stopped a run: ``outcome`` holds the rows evaluated so
    far, its report marked as interrupted; the signal that stopped it is the cause."""

    def __init__(self, outcome: RunOutcome) -> None:
        super().__init__()
        self.outcome = outcome


def run(options: RunOptions, workdir: Path,
        progress: Callable[[str], None] = lambda _message: None) -> RunOutcome:
    """Evaluate ``options.source`` on every target × path × input set in isolated
    children, attribute and explore; inputs files and conversions go to ``workdir``,
    which must outlive the outcome's use. Raises :class:`RunInterrupted` when stopped."""
    from nebisect.executors.runner import Runner

    with Runner(options.jobs, cluster=options.cluster) as runner:
        return run_on(runner, options, workdir, progress)


def run_on(runner: Runner, options: RunOptions, workdir: Path,
           progress: Callable[[str], None] = lambda _message: None) -> RunOutcome:
    """:func:`run` on an open runner (``options.jobs`` and ``cluster`` are the runner's):
    a sweep of many sources (the atlas) keeps one runner, so its warm templates serve
    every source."""
    from nebisect.detect.discover import Discovery
    from nebisect.detect.matrix import MatrixRunner
    from nebisect.sources.convert import CONVERSION
    from nebisect.sources.resolve import is_torch_location, resolve_source
    from nebisect.targets import spec_of
    from nebisect.targets.plugins import use_plugins

    timeouts = options.timeouts
    isolator = runner.isolator
    if is_torch_location(options.source):
        # Describing the factory and converting it both fork from the warm conversion
        # template: it starts importing now.
        runner.expect(CONVERSION)
    plugins = use_plugins(options.plugins, timeout=timeouts.load, isolator=isolator)
    targets = list(options.targets)
    for spec in [*targets, *([options.reference] if options.reference else [])]:
        spec_of(spec)
    resolved = resolve_source(options.source, timeout=timeouts.load,
                              isolator=isolator).with_domains(dict(options.input_ranges))
    discovery = Discovery(options.budget, options.families, options.seed,
                          list(targets)) if options.explore else None
    if resolved.kind == "torch" and EXACT_ROW not in targets:
        targets.insert(0, EXACT_ROW)
    matrix = MatrixRunner(
        resolved, targets, workdir, runner, reference=options.reference,
        timeouts=timeouts, convert=_converter(options), plugins=plugins,
        progress=progress, paths=options.paths, discovery=discovery,
        require=options.require, steps=options.steps,
    )
    try:
        report = matrix.run(options.lengths, str(options.inputs or ""))
    except KeyboardInterrupt as stop:
        # Ctrl-C, SIGTERM, SIGHUP: every helper is killed now, and the rows evaluated
        # so far go back, marked as such.
        from nebisect.isolation.interrupt import describe

        runner.abort()
        matrix.report.interrupted = describe(stop)
        matrix.report.regroup()
        raise RunInterrupted(RunOutcome(matrix.report, matrix.bench.saved)) from stop
    _require_a_judged_target(report, list(options.targets))
    return RunOutcome(report, matrix.bench.saved)


def _converter(options: RunOptions) -> Callable[..., Any]:
    from nebisect.sources.convert import OVERRIDES_SETUP, convert_paths

    setup = (*((OVERRIDES_SETUP,) if options.converter_overrides else ()),
             *options.converter_setup)
    return functools.partial(convert_paths, setup=setup, paths=options.paths,
                             deployment=options.deployment_target)


def _require_a_judged_target(result: RunReport, asked: list[str]) -> None:
    """A run whose asked-for targets all skipped (``coreml:*`` off a Mac) judged nothing:
    that is an input error, never "all targets agree"."""
    rows = [r for r in result.rows if r.target in asked and r.role == "target"]
    if result.failed or any(r.verdict.status != "skipped" for r in rows):
        return
    reasons = {r.target: r.verdict.message.removeprefix("skipped: ") for r in rows}
    raise NebisectError("nothing ran: " + "; ".join(
        f"{name} cannot run here ({reasons.get(name) or 'skipped'})" for name in asked))


@dataclass
class RunOutputs:
    """Where a run's results go besides stdout: ``--report``, ``--save-triggers``; the
    source as typed and the converter fixes, which the saved next commands repeat."""

    report: Path | None
    triggers: Path | None
    source: str
    fixes: tuple[str, ...]

    def write(self, outcome: RunOutcome) -> TriggerIndex | None:
        """The triggers of the outcome's groups and the report, which names the triggers
        saved beside it; the index whose commands the table shows (``--save-triggers``'s
        first), None if none."""
        from nebisect.detect.triggers import REPORT_DIRECTORY, save_triggers

        result = outcome.report

        def save(directory: Path) -> TriggerIndex:
            return save_triggers(directory, [f.representative for f in result.findings],
                                 result.rows, outcome.inputs_files,
                                 source=result.source, typed=self.source, fixes=self.fixes)

        shown = save(self.triggers) if self.triggers else None
        if self.report:
            from nebisect.detect.report import write_run_report

            beside = save(self.report / REPORT_DIRECTORY)
            write_run_report(self.report, result, beside)
            shown = shown or beside
        return shown

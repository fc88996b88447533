"""One run of a source over the target matrix: the work behind ``nebisect run``.

:func:`run_source` takes a checked :class:`RunOptions`, opens the runner (isolators and executor;
:func:`run_source_on` takes an open one), resolves the source, runs
:class:`~nebisect.detect.matrix.MatrixRunner` and returns the report with the inputs
files its rows were evaluated on. It prints nothing: progress
goes to the callable it is handed, rendering to :mod:`nebisect.detect.run_console` and
:class:`RunOutputs`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nebisect.detect import DEFAULT_BUDGET, DEFAULT_STEPS
from nebisect.errors import NebisectError
from nebisect.evaluate.compression import DEFAULT_TOLERANCE
from nebisect.executors.invocation import Invocation
from nebisect.isolation.timeouts import Timeouts
from nebisect.search.plan import DEFAULT_TIME_BUDGET, TimeBudget
from nebisect.sources.convert import PATHS
from nebisect.sources.domains import InputDomain
from nebisect.sources.inputs import DEFAULT_LENGTHS
from nebisect.targets.spec import REFERENCE_SPEC, TargetSpec

if TYPE_CHECKING:
    from nebisect.detect.matrix import RunReport
    from nebisect.detect.triggers import TriggerIndex
    from nebisect.executors.runner import Runner
    from nebisect.hazards.records import LintFinding
    from nebisect.isolate import Isolator
    from nebisect.sources.resolve import Source

#: For torch sources the converted program is also run exactly: its row says whether
#: conversion preserved the math (and feeds the ``conversion`` attribution).
EXACT_ROW = REFERENCE_SPEC


@dataclass(frozen=True)
class RunOptions:
    """What a run evaluates, checked: the source as typed, the command's
    :class:`~nebisect.executors.invocation.Invocation` (the targets asked for, timeouts,
    memory limit, plugins, jobs, cluster), the oracle (None: the source's own), the
    inputs (an ``.npz``, else the ``lengths``), the conversion paths and how to convert
    (with nebisect's converter overrides from the start, ``converter_overrides``; a
    failure they cure ending its path, ``strict_conversion``), the exploration
    (``explore`` False: only the lengths or inputs), the placement devices
    that fail closed (``require``), the decode steps a stateful model is judged over
    (``steps``; a model without state is predicted once) and the uncompressed package a
    compressed one is compared with (``baseline``, within ``compression_tolerance``), or
    the compression a torch source's conversion is judged under (``compress``: a checked
    SPEC, :mod:`nebisect.sources.compress`; its uncompressed conversion is the baseline).
    ``function``: the one function of a multifunction package judged (``""``: every
    function, each a run of its own)."""

    source: str
    invocation: Invocation
    reference: TargetSpec | None = None
    inputs: Path | None = None
    lengths: tuple[int, ...] = DEFAULT_LENGTHS
    paths: tuple[str, ...] = PATHS
    converter_overrides: bool = False
    #: a conversion failure nebisect's converter overrides cure ends its path, as it does
    #: at coremltools' defaults (``--strict-conversion``); without it the path is
    #: converted again with them and judged, the failure kept as a finding
    strict_conversion: bool = False
    #: ``module:function`` calls made in the conversion child before converting (a
    #: user's own ``@register_torch_op`` converters), after nebisect's overrides
    converter_setup: tuple[str, ...] = ()
    deployment_target: str = ""
    #: the directory torch conversions are kept in across runs (``--cache``; ``""``: none)
    cache: str = ""
    explore: bool = True
    budget: int = DEFAULT_BUDGET
    #: the whole run's wall seconds (``--time-budget``; None: none given, then
    #: :data:`~nebisect.search.plan.DEFAULT_TIME_BUDGET` for an expensive model)
    time_budget: float | None = None
    families: list[str] | None = None
    seed: int = 0
    input_ranges: Mapping[str, InputDomain] = field(default_factory=dict)
    #: ``--masked-output``: output → the mask input its padded positions follow
    masked_outputs: Mapping[str, str] = field(default_factory=dict)
    require: tuple[str, ...] = ()
    function: str = ""
    baseline: Path | None = None
    compression_tolerance: float = DEFAULT_TOLERANCE
    steps: int = DEFAULT_STEPS
    compress: str = ""

    @property
    def targets(self) -> tuple[TargetSpec, ...]:
        return self.invocation.targets

    @property
    def timeouts(self) -> Timeouts:
        return self.invocation.timeouts

    @property
    def plugins(self) -> tuple[str, ...]:
        return self.invocation.plugins

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
    far, its report marked as interrupted; ``earlier`` the outcomes of the functions of a
    multifunction package judged before it; the signal that stopped it is the cause."""

    def __init__(self, outcome: RunOutcome, earlier: tuple[RunOutcome, ...] = ()) -> None:
        super().__init__()
        self.outcome = outcome
        self.earlier = earlier


def run_source(options: RunOptions, workdir: Path,
               progress: Callable[[str], None] = lambda _message: None) -> list[RunOutcome]:
    """Evaluate ``options.source`` on every target × path × input set in isolated
    children, attribute and explore; inputs files and conversions go to ``workdir``,
    which must outlive the outcomes' use. One outcome, or one per function of a
    multifunction package (``options.function`` unset: each function is a program with
    inputs of its own, judged in a ``workdir`` folder of its own), on one runner.
    Raises :class:`RunInterrupted` when stopped."""
    from nebisect.executors.runner import Runner
    from nebisect.sources.resolve import package_functions

    with Runner.of(options.invocation) as runner:
        functions = () if options.function else package_functions(
            options.source, timeout=options.timeouts.load, isolator=runner.isolator)
        if not functions:
            return [run_source_on(runner, options, workdir, progress)]
        outcomes: list[RunOutcome] = []
        for number, function in enumerate(functions, 1):
            folder = workdir / f"function-{number}"
            folder.mkdir()
            try:
                outcomes.append(run_source_on(runner, replace(options, function=function),
                                              folder, progress))
            except RunInterrupted as stop:
                raise RunInterrupted(stop.outcome, tuple(outcomes)) from stop.__cause__
        return outcomes


def run_source_on(runner: Runner, options: RunOptions, workdir: Path,
                  progress: Callable[[str], None] = lambda _message: None) -> RunOutcome:
    """:func:`run_source` on an open runner (its invocation's jobs and cluster are the runner's):
    a sweep of many sources (the atlas) keeps one runner, so its warm templates serve
    every source. The time budget (``options.time_budget``, or the default an expensive
    model gets) counts from here: describing the source and converting it spend it too."""
    from nebisect.sources.convert import CONVERSION
    from nebisect.sources.resolve import is_torch_location, output_names, resolve_source
    from nebisect.targets.plugins import use_plugins

    timer = TimeBudget(options.time_budget or DEFAULT_TIME_BUDGET,
                       default=options.time_budget is None)
    timeouts = options.timeouts
    isolator = runner.isolator
    if is_torch_location(options.source):
        # Describing the factory and converting it both fork from the warm conversion
        # template: it starts importing now.
        runner.expect(CONVERSION)
    plugins = use_plugins(options.plugins, timeout=timeouts.load, isolator=isolator)
    progress(f"loading {options.source}")
    resolved = resolve_source(options.source, function=options.function,
                              timeout=timeouts.load, isolator=isolator
                              ).with_domains(dict(options.input_ranges))
    if options.masked_outputs:
        resolved = resolved.with_masked_outputs(
            dict(options.masked_outputs),
            output_names(resolved, timeout=timeouts.load, isolator=isolator))
    if options.compress:
        return _run_compressed(runner, options, resolved, plugins, workdir, progress, timer)
    return _judge(runner, options, resolved, plugins, workdir, progress, timer)


def _judge(runner: Runner, options: RunOptions, resolved: Source, plugins: list[str],
           workdir: Path, progress: Callable[[str], None], timer: TimeBudget) -> RunOutcome:
    """:func:`run_source_on` from the resolved source on: the matrix (its exploration
    planned to fit ``timer``), then the comparison with the baseline."""
    from nebisect.detect.discover import Discovery
    from nebisect.detect.matrix import MatrixRunner

    timeouts = options.timeouts
    isolator = runner.isolator
    targets = list(options.targets)
    compared = _baseline_checked(options, resolved.kind, isolator)
    discovery = Discovery(options.budget, options.families, options.seed,
                          list(targets), timer=timer) if options.explore else None
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
    if compared:
        progress(f"comparing with the baseline {options.baseline}")
        _add_compression(report, options, matrix.bench.saved, isolator)
    if resolved.kind == "mlpackage":
        progress("linting the package")
        report.hazards = _lint_errors(resolved, options, isolator)
    _require_a_judged_target(report, [str(target) for target in options.targets])
    return RunOutcome(report, matrix.bench.saved)


def _lint_errors(resolved: Source, options: RunOptions,
                 isolator: Isolator) -> list[LintFinding]:
    """The package's error-severity lint hazards within its declared ranges (candidate
    causes beside the findings, :mod:`nebisect.detect.candidates`)."""
    from nebisect.hazards.graph import Range
    from nebisect.hazards.isolated import lint_isolated
    from nebisect.sources.domains import MASK

    # an image's levels lie within [lo, hi]: a sound range for the interval analysis
    ranges = {name: Range(domain.lo, domain.hi) for name, domain in resolved.domains.items()
              if domain.kind != MASK}
    found = lint_isolated(resolved.ref, source=options.source, assume_fp16=False,
                          input_ranges=ranges, timeout=options.timeouts.load,
                          isolator=isolator)
    return [hazard for hazard in found.findings if hazard.severity == "error"]


def _run_compressed(runner: Runner, options: RunOptions, resolved: Source, plugins: list[str],
                    workdir: Path, progress: Callable[[str], None],
                    timer: TimeBudget) -> RunOutcome:
    """``run SOURCE --compress SPEC`` (:mod:`nebisect.sources.compress`): the torch source
    converted by the run's converter and compressed, each in an isolated child, then the
    compressed package judged with the uncompressed one as its baseline, as ``run
    COMPRESSED --baseline UNCOMPRESSED`` judges it — on the factory's example inputs too,
    within its input domains (a package carries neither). The report names the torch
    source, the compression and the conversion it compressed."""
    from nebisect.sources.compress import compress_source
    from nebisect.sources.resolve import resolve_source

    progress(f"converting {options.source} to compress it with {options.compress}")
    compressed, converted = compress_source(
        resolved, options.compress, workdir / "compress", runner.isolator,
        setup=_setup(options), paths=options.paths, deployment=options.deployment_target,
        timeout=options.timeouts.convert)
    package = resolve_source(compressed.package, timeout=options.timeouts.load,
                             isolator=runner.isolator)
    judged = replace(package.with_domains(resolved.domains),
                     example=_example_for(package, resolved.example),
                     masked_outputs=dict(resolved.masked_outputs),
                     masks_inferred=resolved.masks_inferred)
    package_options = replace(options, source=compressed.package,
                              baseline=Path(compressed.baseline), compress="")

    def named(report: RunReport) -> None:
        report.source = resolved.location
        report.compressed = compressed
        report.conversions[compressed.precision] = converted
        report.timings["conversion"] = converted.timings.wall or 0.0
        if report.compression is not None:
            report.compression.baseline = compressed.baseline_words

    try:
        outcome = _judge(runner, package_options, judged, plugins, workdir, progress, timer)
    except RunInterrupted as stop:
        named(stop.outcome.report)
        raise
    named(outcome.report)
    return outcome


def _example_for(package: Source, example: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A torch factory's example inputs as its package takes them (each input's dtype:
    int64 ids as int32); None when it has none, or they do not name its inputs."""
    import numpy as np

    wanted = {d.name: d.dtype for d in package.inputs}
    if example is None or set(example) != set(wanted):
        return None
    return {name: np.asarray(value).astype(wanted[name]) for name, value in example.items()}


def _baseline_checked(options: RunOptions, kind: str, isolator: Isolator) -> bool:
    """Is there a baseline to compare with? Checked before anything runs: the source
    a package, the baseline one whose inputs and outputs match it, and something
    compressed (else a one-line error)."""
    if options.baseline is None:
        return False
    if kind != "mlpackage":
        raise NebisectError(f"--baseline {options.baseline}: the source must be a compressed "
                            ".mlpackage")
    from nebisect.evaluate.compression import check_baseline

    check_baseline(options.source, str(options.baseline),
                   tolerance=options.compression_tolerance, isolator=isolator,
                   timeout=options.timeouts.load)
    return True


def _add_compression(report: RunReport, options: RunOptions, saved: Mapping[str, str],
                     isolator: Isolator) -> None:
    """The comparison with the baseline on the input sets every run evaluates (not the
    explored ones), its failures as rows attributed ``compression``; the report
    regrouped with them."""
    from nebisect.detect.compression import compression_rows
    from nebisect.evaluate.compression import check_compression

    members = {r.input_set.label: r.input_set for r in report.rows
               if not r.explored and r.input_set.label in saved}
    report.compression = check_compression(
        options.source, str(options.baseline), {label: saved[label] for label in members},
        tolerance=options.compression_tolerance, isolator=isolator,
        timeout=options.timeouts.predict)
    report.rows += compression_rows(report.compression, members)
    report.regroup()


def _converter(options: RunOptions) -> Callable[..., Any]:
    """The run's conversion. Conversions run one at a time, before any cell (the
    matrix's conversion stage), so each computes on every core: GPT-2 124M's two paths
    at both precisions took 98.8 s on one thread of a 2-core VM, 86.1 s on both."""
    from nebisect.isolation.threads import cores
    from nebisect.sources.convert import conversion_precision, convert_paths

    # A path that fails for a reason the overrides cure is converted again with them
    # and judged, unless the user asked for them (installed from the start) or for
    # coremltools' defaults alone (``--strict-conversion``).
    cure = not (options.converter_overrides or options.strict_conversion)
    precisions = tuple(dict.fromkeys(conversion_precision(target.precision)
                                     for target in options.targets if target.runs_programs))
    return functools.partial(convert_paths, setup=_setup(options), paths=options.paths,
                             deployment=options.deployment_target, cure=cure,
                             cache=options.cache, precisions=precisions, threads=cores())


def _setup(options: RunOptions) -> tuple[str, ...]:
    """The calls the conversion child makes before converting: nebisect's overrides
    (``--converter-overrides``), then the user's own converters."""
    from nebisect.sources.convert import OVERRIDES_SETUP

    return (*((OVERRIDES_SETUP,) if options.converter_overrides else ()),
            *options.converter_setup)


def _require_a_judged_target(result: RunReport, asked: list[str]) -> None:
    """A run whose asked-for targets all skipped (``coreml:*`` off a Mac, a program the
    simulator cannot judge) judged nothing: that is an input error, never "all targets
    agree"."""
    rows = [r for r in result.rows if r.target in asked and r.role == "target"]
    if result.failed or any(r.verdict.status != "skipped" for r in rows):
        return
    from nebisect.detect.summary import gap_lines, gaps

    if gaps(rows):
        # What nebisect cannot model: said once, with the targets it kept from judging.
        raise NebisectError("; ".join(gap_lines(rows)))
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

    def numbered(self, number: int) -> RunOutputs:
        """Where the run of a multifunction package's ``number``-th function writes: a
        ``function-N`` directory in each (numbered: a function's name is the package's
        to choose, a directory's is not)."""
        def own(directory: Path | None) -> Path | None:
            return directory / f"function-{number}" if directory is not None else None

        return replace(self, report=own(self.report), triggers=own(self.triggers))

    def write(self, outcome: RunOutcome) -> TriggerIndex | None:
        """The triggers of the outcome's groups and the report, which names the triggers
        saved beside it; the index whose commands the table shows (``--save-triggers``'s
        first), None if none."""
        from nebisect.detect.triggers import REPORT_DIRECTORY, save_triggers

        result = outcome.report
        compressed = result.compressed

        def save(directory: Path) -> TriggerIndex:
            return save_triggers(directory, [f.representative for f in result.findings],
                                 result.rows, outcome.inputs_files,
                                 source=result.source, typed=self.source, fixes=self.fixes,
                                 function=result.function,
                                 baseline=result.compression.baseline if result.compression
                                 else "",
                                 compress=compressed.spec if compressed else "",
                                 compressed=compressed.package if compressed else "",
                                 cured=result.cured_paths)

        shown = save(self.triggers) if self.triggers else None
        if self.report:
            from nebisect.detect.report import write_run_report

            beside = save(self.report / REPORT_DIRECTORY)
            write_run_report(self.report, result, beside)
            shown = shown or beside
        return shown

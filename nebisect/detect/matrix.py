"""The run matrix: every target × conversion path × input set, isolated, judged, attributed.

Input sets (:mod:`nebisect.inputs.inputsets`): the factory's ``example``, the generated
lengths (or ``--inputs``), then — unless exploration is off — the value families
(:mod:`nebisect.detect.discover`), within a prediction budget per target. When
torch.export and jit.trace both convert, both programs are evaluated: a bug may live
on one path only. Each failing cell is attributed (``conversion`` / ``precision`` /
``device``, :mod:`nebisect.detect.attribution`) and names the op where it enters.

A reference that fails (the ``--reference`` target, or torch eager, crashes, raises or
hangs while computing the expected outputs) is not the target's failure: it gets a row
of its own (role ``reference``, its own signature), and the target rows it should have
judged say they were not judged (``skipped``). The run still fails: something broke.

A reference that fails on the input sets every run evaluates cannot judge an
exploration either: the run then does not explore. With exploration off (``run
--explore none``) the matrix is what ``run`` always made —
targets × lengths (or ``--inputs``), no ``example``, no families — on each conversion
path asked for (``--convert export`` alone: today's program whenever export converts).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from nebisect.codec import Form, Record
from nebisect.detect.attribution import Attributor
from nebisect.detect.causes import RunFinding, numbered, root_causes
from nebisect.detect.discover import Discovery, explore_target, values_at
from nebisect.detect.findings import Row, group_failures
from nebisect.detect.realistic import beyond, realistic_floor, realistic_limit, value_scale
from nebisect.detect.remote import run_cells
from nebisect.detect.same_precision import (
    JUDGED_ATTRIBUTION,
    TorchPeer,
    TorchPeers,
    shared_with_torch,
    worse_words,
)
from nebisect.detect.titles import title
from nebisect.evaluate.compression import CompressionCheck
from nebisect.evaluate.workbench import (
    REFERENCE_STAGE,
    CellKey,
    Converter,
    Workbench,
    reference_failure,
)
from nebisect.executors.runner import Runner
from nebisect.hazards.records import LintFinding
from nebisect.inputs.families import Family, InputSet, ParametricFamily, build
from nebisect.inputs.guided import Margin, guided_probes_of, within_domains
from nebisect.inputs.inputsets import base_input_sets, model_inputs
from nebisect.isolate import Isolator
from nebisect.isolation.timeouts import Timeouts
from nebisect.mil.roles import InputRole
from nebisect.search.cliff import Cliff
from nebisect.search.ddmin import Stats
from nebisect.search.explore import ExploreProgress
from nebisect.search.plan import (
    EXPENSIVE_PREDICTION,
    BudgetNote,
    Clock,
    ExplorationPlan,
    TimeBudget,
    duration_words,
    eta,
    plan,
    ranked_boundaries,
)
from nebisect.search.records import CliffFinding, Exploration, FailureGroup
from nebisect.sources.compress import CompressedConversion
from nebisect.sources.convert import (
    PATHS,
    cured_attempts,
    one_path_failure,
)
from nebisect.sources.resolve import Source
from nebisect.targets.plugins import use_plugins
from nebisect.targets.spec import TORCH_REFERENCE_SPEC, TargetSpec
from nebisect.verdict import Status, Verdict

#: how many of a cliff's probes (those nearest its bracket) the report's plot shows
CHART_POINTS = 4
#: why an exploration asked to end at its target's first failure stopped
FIRST_FAILURE = "stopped at the first failure"
#: the reference for a torch model that pins float32
FLOAT32_REFERENCE = TargetSpec("torch", "cpu", "fp32")
#: what torch says when a model pins float32 and its float64 copy mixes the two
DTYPE_PINS = ("must have the same dtype", "expected scalar type", "Expected scalar type",
              "Input type (float) and bias type (double)",
              "Input type (torch.FloatTensor) and weight type (torch.DoubleTensor)",
              "found dtype Float but expected Double", "expected both vectors to have same dtype")


@dataclass
class RunReport(Record):
    """What ``run`` found: every row, the conversions, the explorations, the failure
    groups and the findings merged from them; ``run --json`` and ``report.json`` are its
    JSON (the verdicts' outcome first, the rows before what was made of them)."""

    json_form: ClassVar[Form] = Form(
        omit_defaults=("interrupted", "function", "compressed", "compression", "time_budget",
                       "reference_note", "states", "steps", "shared_with_torch",
                       "torch_peers", "torch_note"),
        derived=(("failed", "reference"), ("reference_failed", "reference")),
        order=("source", "function", "compressed", "reference", "reference_note", "failed",
               "reference_failed",
               "conversions", "rows",
               "findings", "far_findings", "shared_with_torch", "torch_peers", "torch_note",
               "groups", "explorations", "discovery", "time_budget", "timings",
               "margins", "undeclared", "input_scale", "declared_scale", "input_roles",
               "masked_outputs", "masks_inferred", "states", "steps", "paths", "hazards",
               "compression", "interrupted"))

    source: str
    reference: str
    rows: list[Row] = field(default_factory=list)
    conversions: dict[str, Verdict] = field(default_factory=dict)
    #: Why the run stopped before every cell was evaluated ("interrupted by SIGTERM").
    interrupted: str = ""
    #: per explored target: where its predictions went, its groups and cliffs
    explorations: dict[str, Exploration] = field(default_factory=dict)
    groups: list[FailureGroup] = field(default_factory=list)
    #: the exploration settings (budget, families, seed; None: exploration off)
    discovery: dict[str, Any] | None = None
    #: wall seconds: the whole run; ``search``, its attribution and exploration (culprit
    #: search, value families, guided probes, cliff localization, their cells included);
    #: and summed over its parts — ``conversion`` (every isolated conversion),
    #: ``predictions`` (every matrix and exploration cell, process included) and, within
    #: them, ``reference`` (computing the expected outputs)
    timings: dict[str, float] = field(default_factory=dict)
    #: hazards beyond the declared input domains (not failures)
    margins: list[Margin] = field(default_factory=list)
    #: the floating inputs without a declared domain (findings may lie beyond what the
    #: model ever sees: the report says how to declare one)
    undeclared: list[str] = field(default_factory=list)
    #: the largest |value| of the inputs the run starts from (the example, else the
    #: first generated set), and of the floating inputs' declared domains: what a
    #: trigger's distance is measured from, and how far is realistic
    input_scale: float = 1.0
    declared_scale: float = 0.0
    #: findings only at inputs beyond realistic ones (:mod:`nebisect.detect.realistic`):
    #: margins, not failures
    far_findings: list[RunFinding] = field(default_factory=list)
    #: precision findings torch computes as badly at the same precision
    #: (:mod:`nebisect.detect.same_precision`): the model's own conditioning, notes, not
    #: failures
    shared_with_torch: list[RunFinding] = field(default_factory=list)
    #: each precision failure group's program beside torch at its precision, over the
    #: input sets it fails at: what decides :attr:`shared_with_torch` and what a
    #: precision finding's title says of torch
    torch_peers: list[TorchPeer] = field(default_factory=list)
    #: the torch precisions that could not run the model, said once (``""``: none)
    torch_note: str = ""
    #: what the graph says the inputs nobody declared are for, and the domain that
    #: gives them (token ids inside the table they index, …)
    input_roles: list[InputRole] = field(default_factory=list)
    #: outputs compared only where their mask is 1 (output → mask input), and whether
    #: that was inferred from the shapes
    masked_outputs: dict[str, str] = field(default_factory=dict)
    masks_inferred: bool = False
    #: the model's states (a package's ``ct.StateType``s; a torch source's buffers that
    #: ``forward`` updates in place, converted as states) and the successive
    #: predictions each input set was judged over, the states carried (``run --steps``)
    states: list[str] = field(default_factory=list)
    steps: int = 0
    #: the conversion paths whose programs the run evaluated (none for a package source)
    paths: list[str] = field(default_factory=list)
    #: the groups merged by root cause (:mod:`nebisect.detect.causes`), most severe first
    findings: list[RunFinding] = field(default_factory=list)
    #: a package's error-severity lint hazards: candidate causes beside the findings
    #: (:mod:`nebisect.detect.candidates`)
    hazards: list[LintFinding] = field(default_factory=list)
    #: why the reference is not the source's own (a model that pins float32), or ""
    reference_note: str = ""
    #: the function of a multifunction package the rows judged ("" for another source)
    function: str = ""
    #: the comparison with the uncompressed baseline (``run --baseline``; None: none)
    compression: CompressionCheck | None = None
    #: how a torch ``source`` was converted and compressed to be judged (``run
    #: --compress``; None: judged as it is)
    compressed: CompressedConversion | None = None
    #: the time budget the exploration was planned to fit, and what it left unexplored
    #: (None: no budget applied, :mod:`nebisect.search.plan`)
    time_budget: BudgetNote | None = None

    @property
    def failed(self) -> bool:
        """Did a row fail, other than one of a finding beyond realistic inputs, one torch
        shares at the same precision, or a reference note (:attr:`reference_notes`)?"""
        apart = {group.key for finding in [*self.far_findings, *self.shared_with_torch]
                 for group in finding.groups}
        notes = {id(row) for row in self.reference_notes}
        return any(r.verdict.failed and not (r.role == "target" and r.key in apart)
                   and id(r) not in notes for r in self.rows)

    @property
    def reference_notes(self) -> list[Row]:
        """The reference's failures at inputs nebisect generated, in a run that judged
        other inputs: torch refusing an input the tool made up (an integer division by a
        generated zero) judges nothing there and blames nobody — a note, not a failure.
        Where nothing else was judged, the failure stands (the run judged nothing)."""
        judged = any(r.role == "target" and r.verdict.status != "skipped" for r in self.rows)
        return [r for r in self.rows if r.reference_at_generated] if judged else []

    @property
    def reference_failed(self) -> bool:
        return any(r.role == "reference" for r in self.rows)

    def regroup(self) -> None:
        """Group the failing rows (also those of a run that was stopped), nearest the
        example inputs first: a finding at the example's own scale outranks one at 3e4,
        or at 6e-8 (how far, in orders of magnitude: :func:`distance`)."""
        self.paths = list(dict.fromkeys(r.path for r in self.rows if r.path))
        cured = self.cured_paths
        self.groups, found = grouped(
            self.rows, {t: e.cliffs for t, e in self.explorations.items()},
            self.input_scale, self.paths, cured)
        limit, floor = self.realistic_limit, realistic_floor(self.input_scale, self.undeclared)
        near = [f for f in found if not beyond(f, limit, floor)]
        self.far_findings = [f for f in found if beyond(f, limit, floor)]
        self.shared_with_torch = [f for f in near if shared_with_torch(f, self.torch_peers)]
        self.findings = [f for f in near if not shared_with_torch(f, self.torch_peers)]
        for kept in (self.far_findings, self.shared_with_torch):
            numbered(kept, self.rows, lambda finding: title(finding, self.paths, cured))
        numbered(self.findings, self.rows, lambda finding: title(
            finding, self.paths, cured) + worse_words(finding, self.torch_peers))

    @property
    def cured_paths(self) -> list[str]:
        """The conversion paths judged as converted with nebisect's converter overrides
        (they failed at coremltools' defaults: ``run``'s default, not
        ``--strict-conversion``), at any precision."""
        return list(dict.fromkeys(attempt.path for verdict in self.conversions.values()
                                  for attempt in cured_attempts(verdict)))

    @property
    def realistic_limit(self) -> float:
        """The largest trigger magnitude still judged a failure
        (:func:`~nebisect.detect.realistic.realistic_limit`)."""
        return realistic_limit(self.input_scale, [self.declared_scale], self.undeclared)

@dataclass
class MatrixRunner:
    """Runs a source over targets × paths × input sets on the command's ``runner``.

    ``convert`` maps (source, precision, workdir, isolator, timeout=) → ({path:
    package}, verdict) (``nebisect.sources.convert.convert_paths``) for torch sources.
    ``plugins`` are described in isolated children (never imported here) and named in
    every case, whose child imports them. ``discovery`` None turns exploration off.
    A runner on a cluster (:attr:`~nebisect.executors.runner.Runner.remote`) evaluates
    the matrix's cells and the attribution probes of its failing ones there in batches
    (:mod:`nebisect.detect.remote`); otherwise, and for exploration and culprits, cells
    run on the runner's own isolator one by one, as the rows ask for them. ``report`` is
    the report being filled: after an interruption, it holds the rows evaluated until
    then. The runner's ``jobs`` targets are explored at once, each on one of its
    isolators, whose templates start with the run.
    ``require``: the devices whose placement fails closed (``run --require``; None:
    every device, as bisection's trigger search needs), see
    :class:`~nebisect.evaluate.workbench.Workbench`; so are ``steps`` (``run --steps``).
    """

    source: Source
    targets: list[TargetSpec]
    workdir: Path
    runner: Runner
    reference: TargetSpec | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)
    convert: Converter | None = None
    plugins: list[str] = field(default_factory=list)
    progress: Callable[[str], None] = lambda _msg: None
    paths: tuple[str, ...] = PATHS
    discovery: Discovery | None = None
    require: tuple[str, ...] | None = None
    steps: int = 1
    #: what each cell's cost is read with
    clock: Clock = time.perf_counter
    report: RunReport = field(init=False)
    #: the reference is the source's own, which a float32 one replaces for a model
    #: that pins float32 (never one the user named)
    replaceable: bool = field(init=False)
    bench: Workbench = field(init=False)
    attributor: Attributor = field(init=False)
    #: the reference the cells are judged against: ``reference``, else the source's own
    oracle: TargetSpec = field(init=False)
    #: whether ``discovery.timer`` stops the run's work: given, or a default one and the
    #: model expensive (set when exploration is planned)
    timed: bool = field(init=False, default=False)
    #: the labels of the matrix's input sets a spent time budget left unevaluated
    unevaluated: list[str] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        self.replaceable = self.reference is None
        self.oracle = self.reference or self.source.reference
        self.report = RunReport(self.source.location, str(self.oracle),
                                function=self.source.function)
        self.plugins = use_plugins(self.plugins, timeout=self.timeouts.load,
                                   isolator=self.runner.isolator)
        self.bench = Workbench(self.source, self.workdir, self.runner.isolator, self.oracle,
                               self.timeouts, self.convert, self.plugins, self.paths,
                               self.require, self.steps, together=tuple(self.targets),
                               clock=self.clock)
        self.attributor = Attributor(self.bench)

    def run(self, lengths: tuple[int, ...], inputs_path: str = "") -> RunReport:
        started = time.perf_counter()
        report = self.report = RunReport(self.source.location, str(self.oracle),
                                         function=self.source.function)
        described = model_inputs(self.source, lengths)
        floats = described.names("float")
        report.undeclared = [name for name in floats if name not in self.source.domains]
        report.declared_scale = max((self.source.domains[name].magnitude for name in floats
                                     if name in self.source.domains), default=0.0)
        report.input_roles = list(self.source.roles)
        report.masked_outputs = dict(self.source.masked_outputs)
        report.masks_inferred = self.source.masks_inferred
        report.states = list(self.source.states)
        report.steps = self.bench.case_steps if report.states else 0
        discovery = self.discovery
        sets = base_input_sets(self.source, lengths, inputs_path, example=discovery is not None)
        report.input_scale = value_scale(sets[0].arrays if sets else {}, floats)
        self._expect_evaluations()
        npzs = {s.label: self.bench.save_inputs(s.arrays, s.label) for s in sets}
        try:
            if self.bench.convert is not None:
                # the conversions first, under a stage of their own: minutes at real size
                self.progress(f"converting on {', '.join(self.paths)}")
                for target in self.targets:
                    self.bench.paths_of(target)
            self._on_executor([CellKey(target, path, npz) for npz in npzs.values()
                               for target in self.targets for path in self._converted(target)])
        except KeyboardInterrupt:
            # A conversion or the batch was cut short: the conversions made and the cells
            # that finished still make their rows.
            for input_set in sets:
                for target in self.targets:
                    report.rows += self._rows(target, input_set, npzs[input_set.label],
                                              finished_only=True)
            report.conversions.update(self.bench.convert_verdicts())
            raise
        self.unevaluated = []
        for index, input_set in enumerate(sets):
            npz = npzs[input_set.label]
            if index and not self._matrix_time_left():
                # the first set gives every target its verdict; the others wait on time
                self.unevaluated.append(input_set.label)
                continue
            # Rows go into the report as they finish, so an interrupted run keeps them.
            first = len(report.rows)
            for target in self.targets:
                self.progress(f"{target} at {input_set.label}")
                report.rows += self._rows(target, input_set, npz)
            report.conversions.update(self.bench.convert_verdicts())
            report.rows[first:] = self._separate_reference(report.rows[first:], input_set)
        pinned = self._float32_pin(report)
        if pinned:
            self._judge_against(FLOAT32_REFERENCE)
            report = self.run(lengths, inputs_path)
            report.reference_note = (
                f"torch cannot compute this model in float64 ({pinned}: it pins float32); "
                f"judged against {FLOAT32_REFERENCE}, fp32 and fp64 targets within fp16's "
                "ULPs (two float32 computations differ by their own rounding)")
            return report
        searching = time.perf_counter()
        self._attribute(report, npzs)
        if discovery is not None and not self._unreferenced(report, sets):
            report.discovery = {"budget": discovery.budget, "families": discovery.families,
                                "seed": discovery.seed, "paths": list(self.paths)}
            self._explore(report, discovery, lengths)
        search = time.perf_counter() - searching
        report.regroup()
        self._beside_torch(report)
        report.timings = {"total": time.perf_counter() - started, "search": search,
                          **self.bench.seconds()}
        return report

    @staticmethod
    def _unreferenced(report: RunReport, sets: list[InputSet]) -> bool:
        """Did the reference fail at every input set the run started from? Then no
        exploration: nothing it finds could be judged. One that failed at a generated
        set alone leaves the others to start from (their cells still judged)."""
        failed = {r.input_set.label for r in report.rows if r.role == "reference"}
        return bool(failed) and all(s.member.label in failed for s in sets)

    def _beside_torch(self, report: RunReport) -> None:
        """Judge torch at the precision of each precision finding's groups, on the input
        sets they fail at (:mod:`nebisect.detect.same_precision`), and regroup: a finding
        torch computes as badly becomes a note."""
        if not any(f.attribution == JUDGED_ATTRIBUTION for f in report.findings):
            return
        self.progress("judging the precision findings against torch at the same precision")
        peers = TorchPeers(self.bench)
        report.torch_peers = peers.compare(report.findings)
        report.torch_note = peers.note()
        report.regroup()

    def _expect_evaluations(self) -> None:
        """Announce the evaluations to come: their templates import while the source
        converts (a torch source's conversion template covers the run's own)."""
        if not self.targets:
            return
        program = next((t for t in self.targets if t.runs_programs), self.targets[0])
        needs = self.bench.needs(program)
        self.runner.expect(needs, threads=self.runner.jobs if self.discovery else 1)

    def _named(self, name: str) -> TargetSpec:
        """The target of the run a row names."""
        return next(t for t in self.targets if str(t) == name)

    def _converted(self, target: TargetSpec) -> list[str]:
        """The conversion paths ``target``'s cells run (none when none converts)."""
        paths = self.bench.paths_of(target)
        return [] if isinstance(paths, Verdict) else paths

    def _on_executor(self, keys: list[CellKey]) -> None:
        """Evaluate these cells on a cluster, if the run has one (else, one by one as
        the rows ask for them: on this machine the run's own warm isolator is the
        fastest place for a cell)."""
        if self.runner.remote:
            run_cells(self.bench, keys, self.runner, self.progress)

    def _rows(self, target: TargetSpec, input_set: InputSet, npz: str, *,
              finished_only: bool = False) -> list[Row]:
        """One row per conversion path of ``target``, in path order: its verdict where
        the path converted, a convert-error row where it failed and another converted
        (a conversion failure of that path alone, with the other paths' verdicts in its
        message); one convert-error row if no path converts. A path that converted only
        with nebisect's converter overrides has both: the convert-error row of its
        failure at coremltools' defaults, then its verdict (which says how it converted);
        when no path converted at the defaults, one convert-error row (no path) says what
        ``--strict-conversion`` would.
        ``finished_only`` (a run that was stopped): only the cells already evaluated, on
        the conversions already made — nothing is converted or evaluated now."""
        member, name = input_set.member, str(target)
        length = int(member.magnitude) if member.family == "length" else 0
        paths = self.bench.paths_of(target, convert=not finished_only)
        if isinstance(paths, Verdict):
            return [Row(name, length, paths, input_set=member)]
        rows = [Row(name, length, self.bench.evaluate_cell(target, path, npz)[0], path=path,
                    input_set=member) for path in paths
                if not finished_only or self.bench.cached(CellKey(target, path, npz))]
        # A path converted with nebisect's converter overrides is judged, and its failure
        # at coremltools' defaults stays a finding, on a row of its own before them (one
        # for the whole conversion when no path converted at the defaults: it tells the
        # paths that failed with the overrides too).
        beside = {row.path: row.verdict.signature for row in rows}
        cured = self.bench.cured_failures(target, convert=not finished_only)
        rows += [Row(name, length, replace(verdict, target=name), path=path,
                     input_set=member) for path, verdict in cured]
        failed = [] if any(not path for path, _ in cured) else self.bench.failed_paths(
            target, convert=not finished_only)
        rows += [Row(name, length, replace(one_path_failure(attempt, beside), target=name),
                     path=attempt.path, input_set=member) for attempt in failed]
        return sorted(rows, key=lambda row: (PATHS.index(row.path) if row.path in PATHS else -1,
                                             row.verdict.stage != "convert"))

    def _float32_pin(self, report: RunReport) -> str:
        """The message of the default torch float64 reference failing on a dtype the
        model pins (``timesteps.float()`` beside float64 weights: ``mat1 and mat2 must
        have the same dtype``), or ""."""
        if not self.replaceable or self.oracle != TORCH_REFERENCE_SPEC:
            return ""
        return next((r.verdict.message.rpartition("failed: ")[2]
                     for r in report.rows if r.role == "reference"
                     and any(pin in r.verdict.message for pin in DTYPE_PINS)), "")

    def _judge_against(self, reference: TargetSpec) -> None:
        """Judge every cell against ``reference`` from now on."""
        self.oracle = reference
        self.bench.rejudge(reference)

    def _separate_reference(self, rows: list[Row], input_set: InputSet) -> list[Row]:
        """The reference's failure as its own row; the rows it left unjudged say so."""
        failure = next((r.verdict for r in rows if reference_failure(r.verdict)), None)
        if failure is None:
            return rows
        reference = Verdict.from_dict({**failure.to_dict(), "target": str(self.oracle)})
        reference.message = f"reference failed: {failure.message}"
        separated = [Row(str(self.oracle), rows[0].length, reference, role="reference",
                         input_set=input_set.member)]
        for row in rows:
            if reference_failure(row.verdict):
                row.verdict = Verdict(
                    Status.SKIPPED, REFERENCE_STAGE, target=row.target, timings=row.verdict.timings,
                    message=f"not judged: the reference {self.oracle} failed "
                    f"({failure.signature})",
                )
            separated.append(row)
        return separated

    def _attribute(self, report: RunReport, npzs: dict[str, str]) -> None:
        """Fill attribution and culprit of every failing matrix row."""
        failing = [r for r in report.rows if r.verdict.failed and r.role == "target"
                   and r.verdict.stage != "convert"]
        self._on_executor([key for r in failing
                           for key in self.attributor.probe_keys(r.path, npzs[r.input_set.label])])
        for row in report.rows:
            if not row.verdict.failed or row.role != "target":
                continue
            if row.verdict.stage == "convert":
                row.attribution = "conversion"
                continue
            row.attribution, row.culprit = self.attributor.explain(
                CellKey(self._named(row.target), row.path, npzs[row.input_set.label]),
                row.verdict)

    def _explore(self, report: RunReport, discovery: Discovery, lengths: tuple[int, ...]) -> None:
        described = model_inputs(self.source, lengths)
        families = build(described, discovery.families, discovery.seed)
        explored = [(target, paths) for target in discovery.targets or self.targets
                    if not isinstance(paths := self.bench.paths_of(target), Verdict)]
        planned = self._plan(report, discovery, explored)
        wanted = [str(target) for target, _ in explored]
        if not planned.explore:
            # no time left to explore: not even lint's probes (nor their margins)
            explored, families = [], []
        probes = guided_probes_of(self.bench, self.targets) if any(
            f.name == "const" for f in families) else []
        guided, report.margins = within_domains(probes, described.domains)
        guided = ranked_boundaries(guided)[:planned.guided]
        timer = discovery.timer

        def work(item: tuple[TargetSpec, list[str]], isolator: Isolator) -> tuple[Exploration,
                                                                           list[Row]]:
            target, paths = item
            rows: list[Row] = []

            def show(p: ExploreProgress) -> None:
                left = eta(p.spent, p.budget, 1 / p.rate if p.rate > 0 else 0.0)
                if timer is not None and self.timed:
                    left = min(left, max(timer.left(), 0.0))
                self.progress(f"exploring {target}: {p.spent}/{p.budget} predictions · "
                              f"{p.rate:.1f}/s · ETA {duration_words(left)} · "
                              f"{p.failures} failing · {p.label}")

            def failed(_stats: Stats) -> str | None:
                # A path that did not convert is no reason to stop exploring the others.
                seen = [*report.rows, *rows]
                if discovery.first_failure and any(
                        r.target == str(target) and r.role == "target" and r.verdict.failed
                        and r.verdict.stage != "convert" for r in seen):
                    return FIRST_FAILURE
                return timer.stop() if timer is not None and self.timed else None

            # Each target explores input sets of its own choosing: its cells are judged
            # apart (judged beside them, the other target's would mostly go unused).
            attributor = replace(self.attributor, bench=replace(
                self.bench, isolator=isolator, together=()))
            return explore_target(attributor, target, paths, families, budget=planned.explore,
                                  guided=guided, rows=rows, progress=show, stop=failed,
                                  localize=planned.localize, locate=self._time_left), rows

        # Rows join the report in target order, however the threads finished.
        for (target, _), (exploration, rows) in zip(explored, self.runner.map(explored, work),
                                                     strict=True):
            report.explorations[str(target)] = exploration
            report.rows += rows
        if report.time_budget is not None:
            report.time_budget.account({target: report.explorations[target].spent
                                        if target in report.explorations else 0
                                        for target in wanted},
                                       (timer.stop() if timer else None) or "")
        named = {family.name: family for family in families}
        for exploration in report.explorations.values():
            for finding in exploration.cliffs:
                if self._time_left():
                    self._chart(finding, named.get(finding.family))

    def _time_left(self) -> bool:
        """May new work start: no time budget applies, or it is not spent."""
        timer = self.discovery.timer if self.discovery else None
        return not self.timed or timer is None or timer.left() > 0

    def _matrix_time_left(self) -> bool:
        """May the matrix evaluate another input set: :meth:`_time_left`, a time budget
        applying as soon as the predictions made so far price the model
        (:meth:`_applies`)."""
        timer = self.discovery.timer if self.discovery else None
        if timer is not None:
            self.timed = self._applies(timer, self._slowest(self.targets))
        return self._time_left()

    def _slowest(self, targets: list[TargetSpec]) -> float:
        """The dearest of ``targets``' priced predictions (0: none made yet)."""
        return max((self.bench.prediction_seconds(t) or 0.0 for t in targets), default=0.0)

    @staticmethod
    def _applies(timer: TimeBudget, slowest: float) -> bool:
        """Does ``timer`` stop the run's work: given, or a default one and the model
        expensive (its dearest prediction over :data:`EXPENSIVE_PREDICTION`)."""
        return not timer.default or slowest > EXPENSIVE_PREDICTION

    def _plan(self, report: RunReport, discovery: Discovery,
              explored: list[tuple[TargetSpec, list[str]]]) -> ExplorationPlan:
        """The exploration that fits the time left (:func:`~nebisect.search.plan.plan`),
        from what each explored target's matrix predictions cost: the whole ``--budget``
        when no time budget applies (none given and every prediction cheap). A budget
        that applies is said in the report, with the targets it leaves unexplored."""
        costs = {str(t): self.bench.prediction_seconds(t) or 0.0 for t, _ in explored}
        slowest = max(costs.values(), default=0.0)
        timer = discovery.timer
        self.timed = timer is not None and self._applies(timer, slowest)
        if timer is None or not self.timed:
            return plan(None, costs, budget=discovery.budget, paths={})
        planned = plan(timer.left(), costs, budget=discovery.budget,
                       paths={str(t): len(paths) for t, paths in explored},
                       jobs=self.runner.jobs, reference=self.bench.reference_seconds())
        report.time_budget = BudgetNote(
            timer.seconds, timer.default, slowest,
            self.bench.seconds()["conversion"], planned.explore, discovery.budget,
            note=planned.note, unevaluated_sets=list(self.unevaluated))
        self.progress(report.time_budget.lines()[0])
        return planned

    def _chart(self, finding: CliffFinding, family: Family | None) -> None:
        """The cliff plot's series: every target's output (and the reference's) at the
        element the cliff's sides show, at the probes nearest the bracket, on the cliff's
        conversion path."""
        if not isinstance(family, ParametricFamily):
            return
        finding.chart_x = chart_points(finding.cliff)
        npzs = [self.bench.save_inputs(family.inputs_at(x).arrays) for x in finding.chart_x]
        for target in self.targets:
            paths = self.bench.paths_of(target)
            if isinstance(paths, Verdict) or not {finding.path, ""} & set(paths):
                continue
            self.progress(f"charting the {finding.family} cliff on {target}")
            path = finding.path if finding.path in paths else ""
            runs = [values_at(self.bench.evaluate_cell(target, path, npz)[1], finding.cliff.element)
                    for npz in npzs]
            finding.series[str(target)] = [output for output, _ in runs]
            finding.series.setdefault("reference", [reference for _, reference in runs])


def grouped(rows: list[Row], cliffs: dict[str, list[CliffFinding]], scale: float,
            paths: list[str], cured: Sequence[str] = ()
            ) -> tuple[list[FailureGroup], list[RunFinding]]:
    """The failure groups of ``rows`` (``cliffs`` per target attached), nearest inputs of
    ``scale`` first, and the findings merged from them, titled for a run on ``paths``
    (``cured``: those converted with nebisect's converter overrides): what ``run``
    reports, and ``fuzz SOURCE`` of its explained cases."""
    groups = sorted(group_failures(rows, cliffs),
                    key=lambda g: distance(g.smallest.magnitude, scale))
    findings = root_causes(groups, rows, lambda magnitude: distance(magnitude, scale),
                           lambda finding: title(finding, paths, cured))
    return groups, findings


def distance(magnitude: float, scale: float) -> float:
    """How far a trigger of ``magnitude`` lies from inputs of ``scale``: |log10| of their
    ratio (0: the same scale; 4: ten thousand times larger or smaller). A scale that is
    not a positive finite number (an example holding inf or NaN) counts as 1."""
    if magnitude <= 0 or not math.isfinite(magnitude):
        return 0.0 if magnitude == 0 else math.inf
    if not 0 < scale < math.inf:
        scale = 1.0
    return abs(math.log10(magnitude / scale))


def chart_points(cliff: Cliff) -> list[float]:
    """The x values of the cliff's probes nearest its bracket, ascending."""
    xs = sorted({float(p["x"]) for p in cliff.probes} | {cliff.lo, cliff.hi})
    nearest = sorted(xs, key=lambda x: min(abs(x - cliff.lo), abs(x - cliff.hi)))
    return sorted(nearest[:CHART_POINTS])

"""``nebisect.run``: ``nebisect run`` as a function, returning the report it renders.

The source is what the CLI takes, or an object of the caller's process
(:func:`~nebisect.api.common.saved_source`); a module no path could save is reported
as the failures of its paths (:func:`_capture_report`), as converting a factory's
module that crashes is.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from nebisect.errors import NebisectError
from nebisect.sources.executorch import is_executorch_program

if TYPE_CHECKING:
    from nebisect.detect.causes import RunFinding
    from nebisect.detect.matrix import RunReport
    from nebisect.detect.source_run import RunOptions, RunOutcome, RunOutputs
    from nebisect.detect.triggers import TriggerIndex
    from nebisect.executors.invocation import Invocation
    from nebisect.sources.capture import Capture
    from nebisect.targets.spec import TargetSpec

from nebisect.api.common import (
    Progress,
    Result,
    Stopped,
    declared_of,
    items,
    progress_to,
    saved_source,
    source_label,
    stoppable,
    stopped_with,
)
from nebisect.options.generate import api_function, keywords
from nebisect.options.run_table import RUN
from nebisect.options.table import Many, Numbers, PathOption


@dataclass
class RunResult(Result):
    """What ``run`` found: the report (its rows, findings, explorations) and the index
    of the triggers saved for it (``report`` / ``save_triggers``; None: not saved).

    ``ok`` is the CLI's exit code 0; ``to_json()`` is ``run --json``; in a notebook the
    result shows as the findings and the matrix (``_repr_html_``)."""

    report: RunReport
    triggers: TriggerIndex | None = None
    #: the findings as upstream issue texts (Markdown), when ``markdown`` was asked for
    issues: str = ""

    @property
    def ok(self) -> bool:
        """No failure was found and the run finished (``nebisect run`` exits 0)."""
        return not self.report.interrupted and not self.report.failed

    @property
    def findings(self) -> list[RunFinding]:
        """One per root cause, most severe first."""
        return self.report.findings

    @property
    def interrupted(self) -> str:
        return self.report.interrupted

    def to_json(self) -> str:
        """The report as ``nebisect run --json`` prints it."""
        return json.dumps(self.report.to_dict(), indent=2, default=str)

    def _repr_html_(self) -> str:
        from nebisect.detect.report import run_payload
        from nebisect.report.html import render_fragment

        return render_fragment(run_payload(self.report, self.triggers))

    def __repr__(self) -> str:
        """The findings as the terminal shows them, without the colours."""
        from rich.text import Text

        from nebisect.detect.summary import finding_lines

        head = (f"RunResult({self.report.source}: {'ok' if self.ok else 'failed'}, "
                f"{len(self.findings)} finding(s))")
        return "\n".join([head, *(Text.from_markup(line).plain for finding in self.findings
                                  for line in finding_lines(finding))])


class RunKeywords(TypedDict, total=False):
    """The keywords of :func:`run` that are ``nebisect run``'s options, typed for the
    caller's checker (``tests/test_options.py`` holds them to the option table)."""

    target: Many
    inputs: PathOption
    lengths: Numbers
    reference: str
    timeout: Numbers
    memory: str | int | None
    cache: str | None
    converter_overrides: bool
    strict_conversion: bool
    deployment_target: str
    plugin: Many
    explore: str
    budget: int | str | None
    time_budget: str | float | None
    steps: int | str | None
    families: Many
    seed: int
    input_range: Many
    masked_output: Many
    convert: str
    jobs: int | None
    report: PathOption
    save_triggers: PathOption
    markdown: PathOption
    force: bool
    cluster: str | None
    require: Many
    function: str
    baseline: PathOption
    compression_tolerance: float | str | None
    compress: str


@stoppable
@api_function(RUN)
def run(
    source: Any,
    *,
    example_inputs: Any = None,
    dynamic_dims: dict[str, dict[int, tuple[int, int]]] | None = None,
    input_domains: dict[str, Any] | None = None,
    masked_outputs: dict[str, str] | None = None,
    progress: Progress = True,
    **options: Unpack[RunKeywords],
) -> RunResult | ProgramsResult:
    """``nebisect run`` (see ``nebisect run --help``) on ``source``; the options are the
    CLI's. An ExecuTorch program (``.pte``) gives a :class:`ProgramsResult`: a run of
    each of its Core ML delegates; so does a multifunction package, a run of each
    function (``function``: that one alone, a :class:`RunResult`). ``markdown``: a file
    the findings are written to as upstream issue texts (``issues`` holds the text).
    ``progress``: True shows it (a line in a notebook, a live status in a terminal,
    plain lines in a log), False hides it, a callable receives each message.

    A module object is exported and traced in forks of this process, each within
    ``memory`` and the convert ``timeout``, what its ``forward`` starts killed with it.
    Ctrl-C, and SIGTERM or SIGHUP left at their default, raise
    :class:`~nebisect.api.common.Stopped` with the result so far, nothing left running or
    on disk; what this process keeps afterwards (a subreaper flag, one idle thread) is
    in :mod:`nebisect.api`'s docstring and SECURITY.md.
    """
    given = keywords(RUN, options)
    markdown, inputs = given.pop("markdown"), given["inputs"]
    report, save_triggers = given.pop("report"), given.pop("save_triggers")
    issues = _markdown_file(markdown, source, inputs, force=given["force"])
    if isinstance(source, (str, os.PathLike)) and is_executorch_program(os.fspath(source)):
        from nebisect.sources.compress import check_compress

        check_compress(given["compress"], os.fspath(source))
        result: RunResult | ProgramsResult = _run_programs(
            os.fspath(source), report, save_triggers, progress, given, bool(issues))
    else:
        result = _run_one(source, example_inputs,
                          declared_of(dynamic_dims, input_domains, masked_outputs),
                          report, save_triggers, progress, given, bool(issues))
    if issues is not None:
        from nebisect.files import write_text

        write_text(issues, result.issues)
    return result


def _markdown_file(markdown: str | os.PathLike[str] | None, source: Any,
                   inputs: str | os.PathLike[str] | None, *, force: bool) -> Path | None:
    """``markdown`` checked before the run: a file in an existing, writable directory,
    apart from what the run reads, new unless ``force`` (None: not asked for)."""
    if markdown is None:
        return None
    from nebisect.options.parsers import source_path
    from nebisect.report.outputs import output_file

    read = [("the source", source_path(os.fspath(source)))] if isinstance(
        source, (str, os.PathLike)) else []
    return output_file(markdown, "--markdown", force=force, create=False,
                       inputs=[*read, *([("--inputs", Path(inputs))] if inputs else [])])


def _issue_text(report: RunReport, triggers: TriggerIndex | None = None,
                inputs_files: Mapping[str, str] | None = None,
                fixes: Sequence[str] = ()) -> str:
    """The findings of ``report`` as upstream issue texts
    (:func:`nebisect.minimize.repro.finding.issue_text`)."""
    from nebisect.minimize.repro.finding import issue_text

    return issue_text(report, triggers, inputs_files or {}, fixes)


def _run_one(source: Any, example_inputs: Any, declared: dict[str, Any], report: Any,
             save_triggers: Any, progress: Progress, given: dict[str, Any],
             issues: bool) -> RunResult | ProgramsResult:
    """:func:`run` of a source that is not an ExecuTorch program; ``issues``: each
    result carries its findings as upstream issue texts."""
    from nebisect.detect.source_run import RunInterrupted, RunOutputs, run_source

    invocation = run_invocation(given)
    with tempfile.TemporaryDirectory(prefix="nebisect-run-") as tmp:
        workdir = Path(tmp)
        with stopped_with(lambda why: RunResult(_stopped_report(source, why))):
            saved, capture = saved_source(
                source, example_inputs, declared, workdir / "source",
                timeout=invocation.timeouts.convert, memory=invocation.memory)
        options = run_options(saved, given, invocation)
        outputs = RunOutputs(Path(report) if report is not None else None,
                             Path(save_triggers) if save_triggers else None,
                             saved, options.fixes)
        check_outputs(outputs, options.inputs, force=given["force"])
        if capture is not None and capture.artifact is None:
            captured = _capture_report(saved, capture, options.targets)
            return RunResult(captured, issues=_issue_text(captured) if issues else "")
        with progress_to(progress) as told:
            try:
                outcomes = run_source(options, workdir, told)
            except RunInterrupted as stop:
                _add_capture_failures(stop.outcome.report, capture)
                raise Stopped(_results(saved, [*stop.earlier, stop.outcome], outputs)
                              ) from stop
        _add_capture_failures(outcomes[0].report, capture)
        return _results(saved, outcomes, outputs, issues)


def _stopped_report(source: Any, why: str) -> RunReport:
    """The report of a run stopped (``why``) while it saved ``source`` (capturing a
    module): no row, the interruption said."""
    from nebisect.detect.matrix import RunReport
    from nebisect.targets.spec import TORCH_REFERENCE

    report = RunReport(source_label(source), TORCH_REFERENCE)
    report.interrupted = why
    return report


def _results(source: str, outcomes: Sequence[RunOutcome], outputs: RunOutputs,
             issues: bool = False) -> RunResult | ProgramsResult:
    """The result of one outcome, or of one per function of a multifunction package
    (``outputs``' directories get a ``function-N`` directory each); ``issues``: with
    their findings as upstream issue texts (made while the run's inputs files exist)."""
    def result(outcome: RunOutcome, written: RunOutputs) -> RunResult:
        made = RunResult(outcome.report, written.write(outcome))
        if issues:
            made.issues = _issue_text(outcome.report, made.triggers, outcome.inputs_files,
                                      outputs.fixes)
        return made

    if len(outcomes) == 1:
        return result(outcomes[0], outputs)
    results = [result(outcome, outputs.numbered(number))
               for number, outcome in enumerate(outcomes, 1)]
    return ProgramsResult(source, results, [f"function {r.report.function}" for r in results])


@dataclass
class ProgramsResult(Result):
    """``run`` of a source holding several programs: one result per Core ML delegate of
    an ExecuTorch program, in the program's order (:mod:`nebisect.sources.executorch`),
    or per function of a multifunction package, its default first; ``headers`` name each
    program ("Core ML delegate 1 of 2", "function decode")."""

    source: str
    programs: list[RunResult]
    headers: list[str]

    @property
    def ok(self) -> bool:
        return all(program.ok for program in self.programs)

    @property
    def findings(self) -> list[RunFinding]:
        return [finding for program in self.programs for finding in program.findings]

    def to_json(self) -> str:
        """``{"source": the .pte, "programs": [each delegate's run --json]}``."""
        return json.dumps({"source": self.source,
                           "programs": [json.loads(p.to_json()) for p in self.programs]},
                          indent=2)

    def _repr_html_(self) -> str:
        return "".join(f"<h3>{escape(header)}</h3>{program._repr_html_()}"
                       for header, program in zip(self.headers, self.programs, strict=True))

    @property
    def issues(self) -> str:
        """Each program's issue texts under a heading naming it."""
        return "\n".join(f"# {header} of {Path(self.source).name}\n\n{program.issues}"
                         for header, program in zip(self.headers, self.programs, strict=True))


def _run_programs(pte: str, report: Any, save_triggers: Any, progress: Progress,
                  given: dict[str, Any], issues: bool = False) -> ProgramsResult:
    """Each Core ML delegate of the ExecuTorch program ``pte`` run as a package source;
    ``report`` and ``save_triggers`` get a ``delegate-N`` directory each; ``issues``:
    each with its findings as upstream issue texts."""
    from nebisect.isolation.timeouts import Timeouts
    from nebisect.sources.executorch import extract_programs

    def own(directory: Any, number: int) -> Path | None:
        return Path(directory) / f"delegate-{number}" if directory is not None else None

    with tempfile.TemporaryDirectory(prefix="nebisect-pte-") as tmp:
        packages = extract_programs(pte, Path(tmp),
                                    timeout=Timeouts.parse(items(given["timeout"])).load)
        results = []
        for number, package in enumerate(packages, 1):
            result = _run_one(str(package), None, declared_of(None, None, None),
                              own(report, number), own(save_triggers, number), progress,
                              given, issues)
            assert isinstance(result, RunResult)
            results.append(result)
        return ProgramsResult(pte, results, [f"Core ML delegate {number} of {len(results)}"
                                             for number in range(1, len(results) + 1)])


def run_invocation(given: Mapping[str, Any]) -> Invocation:
    """The :class:`~nebisect.executors.invocation.Invocation` of ``run``'s keywords
    (``given``, :func:`~nebisect.options.generate.keywords`' of
    :data:`~nebisect.options.run_table.RUN`), each error the CLI's one line: made before
    anything runs, a module's capture included (its time and memory limits)."""
    from nebisect.bounds import MAX_JOBS, check_count
    from nebisect.executors.invocation import Invocation
    from nebisect.isolation.threads import cores
    from nebisect.isolation.timeouts import Timeouts
    from nebisect.options.parsers import parse_memory
    from nebisect.targets.plugins import parse_targets

    jobs = given["jobs"]
    timeouts, plugins = Timeouts.parse(items(given["timeout"])), tuple(items(given["plugin"]))
    return Invocation(
        parse_targets(items(given["target"]) or default_targets(), plugins,
                      timeout=timeouts.load),
        timeouts, parse_memory(given["memory"]), plugins,
        cores() if jobs is None else check_count(f"--jobs {jobs}", jobs, MAX_JOBS),
        given["cluster"])


def run_options(source: str, given: Mapping[str, Any], invocation: Invocation) -> RunOptions:
    """The CLI's checks of ``run``'s options (``given``: every keyword of
    :data:`~nebisect.options.run_table.RUN`, ``invocation`` their
    :func:`run_invocation`), each error the CLI's one line; the checked
    :class:`~nebisect.detect.source_run.RunOptions`."""
    from nebisect.bounds import check_seed
    from nebisect.detect import DEFAULT_BUDGET
    from nebisect.detect.source_run import RunOptions
    from nebisect.options.parsers import (
        CONVERT_CHOICES,
        parse_budget,
        parse_choice,
        parse_compression_tolerance,
        parse_duration,
        parse_families,
        parse_input_ranges,
        parse_masked_outputs,
        parse_steps,
    )
    from nebisect.sources.compress import check_compress
    from nebisect.sources.conversion_cache import cache_directory
    from nebisect.sources.deployment import check_deployment
    from nebisect.targets.plugins import parse_targets

    if not source:
        raise NebisectError("give a SOURCE (an .mlpackage or path/to/file.py:factory)")
    spec = check_compress(given["compress"], source, given["baseline"])
    check_deployment(given["deployment_target"])
    paths = CONVERT_CHOICES[parse_choice("--convert", given["convert"], CONVERT_CHOICES)]
    seed = given["seed"]
    check_seed(f"--seed {seed}", seed)
    explores = parse_choice("--explore", given["explore"], EXPLORE_CHOICES) != "none"
    inputs, baseline, reference = given["inputs"], given["baseline"], given["reference"]
    oracle = (parse_targets([reference], timeout=invocation.timeouts.load)[0] if reference
              else None)
    return RunOptions(
        source, invocation, oracle, Path(inputs) if inputs else None, paths=paths,
        converter_overrides=given["converter_overrides"],
        strict_conversion=given["strict_conversion"],
        deployment_target=given["deployment_target"],
        cache=cache_directory(given["cache"] or ""), explore=explores,
        budget=parse_budget(str(given["budget"])) if explores else DEFAULT_BUDGET,
        time_budget=parse_duration("--time-budget", given["time_budget"]) if explores else None,
        families=parse_families(",".join(items(given["families"]))) if explores else None,
        seed=seed, lengths=parse_lengths(given["lengths"]),
        input_ranges=parse_input_ranges(items(given["input_range"])),
        masked_outputs=parse_masked_outputs(items(given["masked_output"])),
        steps=parse_steps(str(given["steps"])), require=tuple(dict.fromkeys(
            parse_choice("--require", device, REQUIRE_CHOICES)
            for device in items(given["require"]))), function=given["function"],
        baseline=Path(baseline) if baseline else None,
        compression_tolerance=parse_compression_tolerance(str(given["compression_tolerance"])),
        compress=spec)


EXPLORE_CHOICES = ("auto", "none")
#: the devices ``--require`` makes placement fail closed on
REQUIRE_CHOICES = ("ne", "gpu")


def default_targets() -> list[str]:
    """Real Core ML compute units on macOS; the simulator's fp32/fp16/ANE models elsewhere."""
    import platform

    if platform.system() == "Darwin":
        return ["coreml:cpu", "coreml:gpu", "coreml:ne", "coreml:all"]
    return ["sim:fp32", "sim:fp16", "sim:ane"]


def parse_lengths(given: str | float | Sequence[Any]) -> tuple[int, ...]:
    """``--lengths``: comma-separated integers (or one, or a sequence of them), each a
    count."""
    from nebisect.bounds import check_count

    text = (str(given) if isinstance(given, (str, int, float))
            else ",".join(str(v) for v in given))
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise NebisectError(f"--lengths {text!r}: give comma-separated integers") from None
    if not values:
        raise NebisectError(f"--lengths {text!r}: give at least one length")
    return tuple(check_count(f"--lengths {value}", value) for value in values)


def check_outputs(outputs: Any, inputs: Path | None, *, force: bool) -> None:
    """``report`` and ``save_triggers`` are directories apart from what the run reads;
    unless ``force``, ``report`` holds no report (its own, or a function's in its
    ``function-N``) that this run's would replace."""
    from nebisect.options.parsers import source_path
    from nebisect.report import REPORT_FILE_NAMES
    from nebisect.report.outputs import apart_from_inputs, output_directory

    for directory, option in ((outputs.report, "--report"), (outputs.triggers, "--save-triggers")):
        if directory:
            apart_from_inputs(directory, option, [
                ("the source", source_path(outputs.source)),
                *([("--inputs", inputs)] if inputs else [])])
            output_directory(directory, option)
    if outputs.report and not force:
        held = sorted(path for name in REPORT_FILE_NAMES for where in ("", "function-*/")
                      for path in outputs.report.glob(where + name))
        if held:
            raise NebisectError(f"--report {outputs.report}: holds the report of an earlier "
                                f"run ({held[0].relative_to(outputs.report)}; --force "
                                "replaces it)")



def _capture_report(location: str, capture: Capture,
                    targets: Sequence[TargetSpec]) -> RunReport:
    """The report of a module no path could save: each path's failure on every target,
    grouped and ranked as a run's are (the reference cannot run either)."""
    from nebisect.detect.matrix import RunReport
    from nebisect.detect.source_run import EXACT_ROW
    from nebisect.targets.spec import TORCH_REFERENCE

    report = RunReport(location, TORCH_REFERENCE)
    _add_capture_failures(report, capture, [str(t) for t in (EXACT_ROW, *targets)])
    return report


def _add_capture_failures(report: RunReport, capture: Capture | None,
                          targets: Sequence[str] = ()) -> None:
    """Rows for the paths that could not save the module (every target fails there at
    conversion), the groups and findings made again with them."""
    if capture is None or not capture.failures:
        return
    from nebisect.detect.findings import Row
    from nebisect.search.space import Member

    named = list(dict.fromkeys([*targets, *(r.target for r in report.rows
                                             if r.role == "target")]))
    # exporting and tracing ran forward on the example inputs
    example = Member("example", "example")
    for path, verdict in capture.failures.items():
        report.rows += [Row(name, 0, verdict, attribution="conversion", path=path,
                            input_set=example) for name in named]
    report.regroup()



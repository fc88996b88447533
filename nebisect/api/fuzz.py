"""``nebisect.fuzz``: op campaigns (``op=``) and model campaigns (a source), as a function."""

from __future__ import annotations

import functools
import json
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from nebisect.api.common import (
    Result,
    Stopped,
    declared_of,
    items,
    saved_path,
    stoppable,
    stopped_with,
)
from nebisect.errors import NebisectError
from nebisect.options.fuzz_table import FUZZ
from nebisect.options.generate import api_function, keywords
from nebisect.options.table import Many, Numbers, PathOption

if TYPE_CHECKING:
    from rich.console import Console

    from nebisect.corpus import Corpus
    from nebisect.fuzzing.campaign import CampaignResult
    from nebisect.fuzzing.fuzz_console import CampaignDisplay
    from nebisect.fuzzing.model_findings import ModelFindings
    from nebisect.fuzzing.model_session import ModelSession
    from nebisect.fuzzing.session import FuzzOptions



@dataclass
class FuzzReport(Result):
    """One result per campaign (per op, or the model's), the options they ran with, a
    model campaign's findings in ``run``'s form (``model``), whether they were stored
    in a corpus, the units that returned no result (``lost``) and the report page.

    ``ok`` is ``fuzz``'s exit code 0: no failure (and, for a model, a path converted).
    Interrupted, it holds what was found until then and says what stopped it
    (``interrupted``)."""

    results: list[CampaignResult]
    options: FuzzOptions
    model: ModelFindings | None = None
    stored: bool = False
    lost: list[str] = field(default_factory=list)
    report_html: Path | None = None
    interrupted: str = ""

    @property
    def ok(self) -> bool:
        failed = any(r.findings for r in self.results)
        skipped = self.model is not None and any(r.skipped for r in self.results)
        return not (self.interrupted or failed or skipped)

    @property
    def findings(self) -> list[Any]:
        """A model campaign's findings as ``run`` ranks them, else every campaign's."""
        if self.model is not None:
            return list(self.model.findings)
        return [finding for result in self.results for finding in result.findings]

    def to_json(self) -> str:
        """``nebisect fuzz --json``."""
        from nebisect.fuzzing.fuzz_console import results_json

        return json.dumps(results_json(self.results, self.options, self.model), indent=2)

    def _repr_html_(self) -> str:
        from nebisect.fuzzing.reporting import payload
        from nebisect.report.html import render_fragment

        return render_fragment(payload(self.results, self.options.target, self.options.seed,
                                       self.options.budget, self.model))


class FuzzKeywords(TypedDict, total=False):
    """The keywords of :func:`fuzz` that are ``nebisect fuzz``'s options, typed for the
    caller's checker (``tests/test_options.py`` holds them to the option table)."""

    op: Many
    target: str | None
    budget: int
    convert: str
    cache: str | None
    families: str | None
    function: str
    seed: int
    jobs: int
    wrap: str
    corpus: PathOption
    report: PathOption
    plugin: Many
    isolation: str
    shrink_budget: int
    timeout: Numbers
    memory: str | int | None
    cluster: str | None


@stoppable
@api_function(FUZZ)
def fuzz(source: Any = None, *, example_inputs: Any = None, dynamic_dims: Any = None,
         input_domains: Any = None, progress: bool | Console = True,
         **options: Unpack[FuzzKeywords]) -> FuzzReport:
    """``nebisect fuzz`` (see ``nebisect fuzz --help``): ``op=`` names ops to fuzz one at
    a time; else ``source`` is a model (a path, or an object of this process as
    :func:`nebisect.run` takes it) — of a multifunction package, ``function`` (its
    default when ""). ``corpus`` keeps each finding as a case, ``report``
    writes report.json/report.html. Interrupted, it raises
    :class:`~nebisect.api.common.Stopped` holding what was found until then."""
    from nebisect.fuzzing.builders import WRAPS
    from nebisect.fuzzing.session import FUZZ_TIMEOUTS, FuzzOptions, default_target
    from nebisect.isolation.timeouts import Timeouts
    from nebisect.options.parsers import parse_memory

    given = keywords(FUZZ, options)
    function, wrap, cluster = given["function"], given["wrap"], given["cluster"]
    ops = [name.strip() for value in items(given["op"]) for name in value.split(",")
           if name.strip()]
    model = source is not None and not (isinstance(source, str) and not source)
    if ops and model:
        raise NebisectError("give either SOURCE (a model) or --op (ops), not both")
    if not ops and not model:
        raise NebisectError("give a SOURCE (an .mlpackage or path/to/file.py:factory) or "
                            "--op OP (--list-ops lists them)")
    if ops and function:
        raise NebisectError(f"--function {function} names a function of a SOURCE package; "
                            "--op campaigns fuzz single ops")
    if wrap not in WRAPS:
        raise NebisectError(f"unknown --wrap {wrap!r}: one of {', '.join(WRAPS)}")
    campaign = FuzzOptions(
        target=given["target"] or default_target(), budget=given["budget"],
        seed=given["seed"], jobs=given["jobs"], wrap=wrap, isolation=given["isolation"],
        plugins=tuple(items(given["plugin"])), shrink_budget=given["shrink_budget"],
        timeouts=Timeouts.parse(items(given["timeout"]), FUZZ_TIMEOUTS),
        memory=parse_memory(given["memory"]),
    )
    corpus, report = given["corpus"], given["report"]
    out = _Outputs(Path(corpus) if corpus is not None else None,
                   Path(report) if report is not None else None)
    if ops:
        return _fuzz_ops(ops, campaign, cluster, out, progress)
    if wrap != "none":
        raise NebisectError("--wrap is for --op campaigns (wraps embed a single op)")
    with stopped_with(lambda why: FuzzReport([], campaign, interrupted=why)), \
            tempfile.TemporaryDirectory(prefix="nebisect-fuzz-") as tmp:
        location = saved_path(source, example_inputs, declared_of(dynamic_dims, input_domains),
                              Path(tmp), timeout=campaign.timeouts.convert,
                              memory=campaign.memory)
        return _fuzz_model(location, campaign, cluster, given["convert"], given["families"],
                           function, given["cache"] or "", out, progress)


@dataclass(frozen=True)
class _Outputs:
    """Where a campaign's findings go: a corpus, a report directory."""

    corpus: Path | None
    report: Path | None

    def store(self, results: list[CampaignResult], keep: Callable[..., None]) -> None:
        if self.corpus is not None:
            from nebisect.corpus import Corpus

            keep(results, corpus=Corpus(self.corpus, create=True))

    def write(self, results: list[CampaignResult], options: FuzzOptions,
              model: ModelFindings | None = None) -> Path | None:
        if self.report is None:
            return None
        from nebisect.fuzzing.reporting import payload
        from nebisect.report import write_report

        return write_report(self.report, "fuzz", payload(results, options.target, options.seed,
                                                         options.budget, model)).html

    def outcome(self, results: list[CampaignResult], options: FuzzOptions,
                keep: Callable[..., None], lost: list[str],
                model: ModelFindings | None = None, interrupted: str = "") -> FuzzReport:
        self.store(results, keep)
        return FuzzReport(results, options, model, self.corpus is not None, lost,
                          self.write(results, options, model), interrupted)


def _fuzz_ops(names: list[str], options: FuzzOptions, cluster: str | None, out: _Outputs,
              progress: bool | Console) -> FuzzReport:
    """Op campaigns: check, fuzz every op's shards (on ``cluster`` when given), store."""
    from nebisect.corpus import Corpus
    from nebisect.executors.runner import Runner
    from nebisect.fuzzing.session import Session, check_target, resolve_ops
    from nebisect.isolation.interrupt import describe
    from nebisect.report.outputs import output_directory

    # Bad ops, targets and corpus paths fail now, not after minutes of fuzzing.
    check_target(options)
    ops = resolve_ops(names)
    if out.corpus is not None:
        Corpus(out.corpus, create=True)
    if out.report is not None:
        output_directory(out.report, "--report")
    keep = functools.partial(_store, options=options)
    session = Session(names, options)
    try:
        # Connect before the bar shows: a scheduler that cannot be reached is one line.
        with Runner(options.jobs, cluster=cluster, mode=options.isolation,
                    memory=options.memory) as runner, \
                _display(progress, options.budget * len(ops)) as display:
            session.run(runner, display)
    except KeyboardInterrupt as stop:
        # Ctrl-C, SIGTERM, SIGHUP: keep and report what was found until then.
        raise Stopped(out.outcome(session.results(), options, keep, [],
                                  interrupted=describe(stop))) from stop
    return out.outcome(session.results(), options, keep, list(session.lost))


def _fuzz_model(source: str, options: FuzzOptions, cluster: str | None, convert: str,
                families: str | None, function: str, cache: str, out: _Outputs,
                progress: bool | Console) -> FuzzReport:
    """A model campaign — on ``function`` of a multifunction package — set up (resolve,
    convert, probe; a torch source's conversion read from and kept in the conversion
    cache ``cache``, else ``$NEBISECT_CACHE``), fuzz (on ``cluster`` when given),
    explain the findings, store."""
    from nebisect.executors.runner import Runner
    from nebisect.fuzzing.model_session import ModelSession
    from nebisect.isolation.interrupt import describe
    from nebisect.options.parsers import CONVERT_CHOICES, parse_choice, parse_families, source_path
    from nebisect.report.outputs import apart_from_inputs, output_directory
    from nebisect.sources.conversion_cache import cache_directory

    paths = CONVERT_CHOICES[parse_choice("--convert", convert, CONVERT_CHOICES)]
    chosen = parse_families(families or "")
    if out.report is not None:
        apart_from_inputs(out.report, "--report", [("the source", source_path(source))])
        output_directory(out.report, "--report")
    with Runner(options.jobs, cluster=cluster, mode=options.isolation,
                memory=options.memory) as runner:
        session = ModelSession(source, options, convert=paths, families=chosen,
                               function=function, cache=cache_directory(cache), runner=runner)
        try:
            keep = functools.partial(_store_model, session=session)
            try:
                with _display(progress, options.budget) as display:
                    session.run(display)
            except KeyboardInterrupt as stop:
                stopped = session.results()
                raise Stopped(out.outcome(stopped, options, keep, [],
                                          session.findings(stopped[0], explain=False),
                                          describe(stop))) from stop
            results = session.results()
            return out.outcome(results, options, keep, list(session.lost),
                               session.findings(results[0]))
        finally:
            session.close()


@contextmanager
def _display(progress: bool | Console, total: int) -> Iterator[CampaignDisplay | None]:
    """The campaign's bar (on stderr, or on the console given), or none."""
    if progress is False:
        yield None
        return
    from rich.console import Console

    from nebisect.fuzzing.fuzz_console import CampaignDisplay

    display = CampaignDisplay(progress if isinstance(progress, Console)
                              else Console(stderr=True), total)
    with display.bar:
        yield display


def _store(results: list[CampaignResult], options: FuzzOptions, corpus: Corpus) -> None:
    """Each op campaign's findings kept as corpus cases."""
    from nebisect.fuzzing.session import dtype_for
    from nebisect.fuzzing.store import record_finding
    from nebisect.fuzzing.subject import OpSubject
    from nebisect.opspecs.ops import get_op

    for result in results:
        subject = OpSubject(get_op(result.subject), dtype_for(options.target), options.wrap)
        for finding in result.findings:
            finding.case_dir = record_finding(
                corpus, finding, subject, options.target, reference=options.reference,
                plugins=options.plugins, seed=options.seed,
            )


def _store_model(results: list[CampaignResult], session: ModelSession, corpus: Corpus) -> None:
    """Each model campaign's findings kept as corpus cases."""
    from nebisect.fuzzing.store import record_model_finding

    options = session.options
    for finding in (f for result in results for f in result.findings):
        finding.case_dir = record_model_finding(
            corpus, finding, session.subject, options.target, reference=session.reference,
            plugins=options.plugins, seed=options.seed,
        )

"""``nebisect.replay``: the corpus as a regression suite, as a function."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from nebisect.api.common import Progress, Result, Stopped, items, progress_to, stoppable
from nebisect.options.generate import api_function, keywords
from nebisect.options.replay_table import REPLAY
from nebisect.options.table import Many, Numbers

if TYPE_CHECKING:
    from nebisect.corpus.store import Problem
    from nebisect.guard.replay import ReplayResult, ReplaySummary


@dataclass
class ReplayReport(Result):
    """Every case's outcome (``summary``), the directories that are not usable cases
    (``problems``) and the cases re-recorded (``updated``, with ``update=True``).

    ``ok`` is ``replay``'s exit code 0: no regression (unless updating), no damaged
    case, and some case replayed (or ``allow_empty``); ``findings`` are the regressions.
    """

    summary: ReplaySummary
    problems: list[Problem] = field(default_factory=list)
    updated: list[ReplayResult] = field(default_factory=list)
    allow_empty: bool = False

    @property
    def damaged(self) -> list[Problem]:
        return [p for p in self.problems if p.damaged]

    @property
    def empty(self) -> bool:
        """No case ran (all skipped or filtered out), which ``allow_empty`` accepts."""
        return not self.summary.replayed and not self.allow_empty

    @property
    def ok(self) -> bool:
        return not (self.findings or self.damaged or self.empty)

    @property
    def findings(self) -> list[ReplayResult]:
        return [] if self.updated else self.summary.regressions

    def to_json(self) -> str:
        """``nebisect replay --json``."""
        return json.dumps({
            "results": [r.to_dict() for r in self.summary.results],
            "problems": [{"path": str(p.path), "reason": p.reason, "damaged": p.damaged}
                         for p in self.problems],
            "updated": [r.case_id for r in self.updated],
        }, indent=2, default=str)

    def _repr_html_(self) -> str:
        from nebisect.report.html import render_fragment
        from nebisect.report.payload import ReportPayload, Table

        rows: list[list[Any]] = [[r.label, r.target, r.outcome, r.verdict.signature, r.reason]
                                 for r in self.summary.results]
        rows += [[str(p.path), "", "damaged" if p.damaged else "skipped", "", p.reason]
                 for p in self.problems]
        return render_fragment(ReportPayload("nebisect replay", tables=[Table(
            f"{len(self.summary.results)} case(s)",
            ["case", "target", "outcome", "verdict", "why"], rows)]))


class ReplayKeywords(TypedDict, total=False):
    """The keywords of :func:`replay` that are ``nebisect replay``'s options, typed for
    the caller's checker (``tests/test_options.py`` holds them to the option table)."""

    target: Many
    jobs: int
    update: bool
    timeout: Numbers
    memory: str | int | None
    no_pickle: bool
    allow_empty: bool
    cluster: str | None


@stoppable
@api_function(REPLAY)
def replay(root: str | os.PathLike[str], *, progress: Progress = True,
           **options: Unpack[ReplayKeywords]) -> ReplayReport:
    """``nebisect replay`` (see ``nebisect replay --help``) of the corpus at ``root``.

    Interrupted, it raises :class:`~nebisect.api.common.Stopped` holding the cases
    replayed until then, the rest marked not run."""
    from nebisect.bounds import MAX_JOBS, check_count
    from nebisect.corpus import Corpus
    from nebisect.executors.invocation import Invocation
    from nebisect.executors.runner import Runner
    from nebisect.guard.replay import record_updates, summarize
    from nebisect.guard.replay import replay as replay_cases
    from nebisect.isolation.interrupt import describe
    from nebisect.isolation.timeouts import Timeouts
    from nebisect.options.parsers import parse_memory
    from nebisect.sources.pickled import pickle_refusing

    given = keywords(REPLAY, options)
    invocation = Invocation(
        timeouts=Timeouts.parse(items(given["timeout"])), memory=parse_memory(given["memory"]),
        jobs=check_count(f"--jobs {given['jobs']}", given["jobs"], MAX_JOBS),
        cluster=given["cluster"])
    # the cases' own targets are replayed: --target only selects them, by glob
    patterns, allow_empty = items(given["target"]), given["allow_empty"]
    corpus = Corpus(Path(root))
    scan = corpus.scan()
    done: list[ReplayResult] = []
    with progress_to(progress) as told:
        try:
            with pickle_refusing(given["no_pickle"]), Runner.of(invocation) as runner:

                def finished(result: ReplayResult) -> None:
                    done.append(result)
                    told(f"replayed {len(done)}/{len(scan.cases)}")

                summary = replay_cases(scan.cases, targets=patterns,
                                       timeouts=invocation.timeouts,
                                       on_result=finished, runner=runner)
        except KeyboardInterrupt as stop:
            stopped = summarize(scan.cases, list(done), patterns, describe(stop))
            raise Stopped(ReplayReport(stopped, list(scan.problems),
                                       allow_empty=allow_empty)) from stop
    updated = record_updates(corpus, summary) if given["update"] else []
    return ReplayReport(summary, list(scan.problems), updated, allow_empty)

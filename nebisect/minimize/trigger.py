"""The trigger a bisection starts from when it is given no inputs: ``run``'s discovery on
its one target.

``bisect SOURCE -t TARGET`` without ``--inputs`` evaluates there what ``run`` evaluates
(:class:`~nebisect.detect.matrix.MatrixRunner`: the factory's example inputs, the input
generated at ``--length``, then the value families within ``--budget`` predictions,
lint's guided probes first) and stops at the first failure. The first failure group's
smallest input set is the trigger: its inputs, its conversion path and — for a
conversion bug, which the converted program cannot show against itself — the torch
graph are what the reduction takes (:meth:`Found.applied`). Only when that finds no
failure either is there nothing to bisect.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from nebisect.detect.discover import Discovery
from nebisect.detect.matrix import MatrixRunner, RunReport
from nebisect.detect.summary import where
from nebisect.detect.triggers import trigger_of
from nebisect.errors import NebisectError
from nebisect.executors.runner import Runner
from nebisect.fixes.converter_compat import ConverterCompat
from nebisect.sources.convert import PATH_LABELS, convert_paths
from nebisect.sources.converter_overrides import overrides_hint
from nebisect.sources.resolve import Source
from nebisect.targets.spec import TargetSpec

if TYPE_CHECKING:
    from nebisect.minimize.options import BisectOptions, SearchProgress


@dataclass(frozen=True)
class Found:
    """A trigger: its inputs file, conversion path (``""``: none), the graph to reduce
    and the line that says which it is."""

    inputs: str
    path: str
    graph: str
    line: str

    def applied(self, options: BisectOptions) -> BisectOptions:
        """``options`` reducing this trigger (a ``--graph`` the user chose stays)."""
        return replace(options, inputs=self.inputs,
                       paths=(self.path,) if self.path else options.paths,
                       graph=self.graph if options.graph == "auto" else options.graph)


def find_trigger(label: str, source: Source, options: BisectOptions, setup: tuple[str, ...],
                 workdir: Path, runner: Runner, progress: SearchProgress) -> Found:
    """The first failure ``run``'s discovery finds on ``options.target`` (converting
    with ``setup`` on ``options.paths``) in the bisection's ``runner``; a one-line error
    when there is none."""
    target = options.target
    workdir.mkdir()
    matrix = MatrixRunner(
        source, [target], workdir, runner, timeouts=options.timeouts,
        convert=functools.partial(convert_paths, setup=setup, paths=options.paths,
                                  cache=options.cache),
        paths=options.paths, progress=progress.phase,
        discovery=Discovery(options.budget, targets=[target], first_failure=True),
    )
    report = matrix.run((options.length,))
    if not report.groups:
        raise NebisectError(f"{label} {_nothing(report, target)}; nothing to bisect")
    # A path that does not convert while another does is a finding of its own; the
    # trigger is a prediction that fails, when there is one.
    found = [(group, trigger_of(1, group, report.rows)) for group in report.groups]
    group, trigger = next(((g, t) for g, t in found if t.stage != "convert"), found[0])
    if trigger.stage == "convert":
        cure = overrides_hint(group.message, f"--fix {ConverterCompat.name}")
        raise NebisectError(f"{label} does not convert ({group.signature}); bisect the "
                            f"conversion with --stage convert" + (f"; {cure}" if cure else ""))
    predictions = sum(row.role == "target" for row in report.rows)
    on = f" [{PATH_LABELS[group.path]}]" if group.path else ""
    line = (f"{group.smallest.label}{on}, found exploring {target} ({predictions} "
            f"predictions): {where(group.attribution, group)}")
    return Found(matrix.bench.saved[group.smallest.label], group.path, trigger.graph, line)


def _nothing(report: RunReport, target: TargetSpec) -> str:
    """Why no trigger was found: the reference failed, the target cannot run here, or
    no input set tried fails."""
    name = str(target)
    rows = [row for row in report.rows if row.target == name]
    reference = next((row.verdict for row in report.rows if row.role == "reference"), None)
    if reference is not None:
        return (f"cannot be judged: the reference {report.reference} fails "
                f"({reference.signature}); give --inputs")
    if rows and all(row.verdict.status == "skipped" for row in rows):
        return f"cannot run on {target} here ({rows[0].verdict.message})"
    tried = list(dict.fromkeys(row.input_set.label for row in rows if not row.explored))
    explored = report.explorations[name].spent if name in report.explorations else 0
    return (f"does not fail on {target} at any input set tried ({', '.join(tried)}, then "
            f"{explored} explored)")

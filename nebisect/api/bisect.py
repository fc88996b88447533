"""``nebisect.bisect``: a failing model reduced to the smallest piece that fails alike."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from nebisect.api.common import (
    Result,
    declared_of,
    items,
    progress_to,
    saved_path,
    source_label,
    stoppable,
    stopped_with,
)
from nebisect.errors import NebisectError
from nebisect.options.bisect_table import BISECT
from nebisect.options.generate import api_function, keywords
from nebisect.options.table import Many, Numbers, PathOption

if TYPE_CHECKING:
    from nebisect.minimize.bisector import BisectResult
    from nebisect.minimize.options import ProgressLine

#: what ``bisect``'s ``progress`` accepts: shown, hidden, or a callable of each line
BisectProgress = bool | Callable[["ProgressLine"], None]


@dataclass
class BisectReport(Result):
    """The reduction (``result``: ``summary.json``, what ``--json`` prints) and the
    directory it was written to; ``repro`` is the standalone script there. Interrupted,
    it says what stopped it (``interrupted``) and holds no reduction."""

    result: BisectResult
    out: Path
    interrupted: str = ""

    @property
    def ok(self) -> bool:
        """The reduction was written (``bisect`` exits 0)."""
        return bool(self.result.files)

    @property
    def findings(self) -> list[BisectResult]:
        """The one failure it reduced."""
        return [self.result]

    @property
    def repro(self) -> Path | None:
        """``repro.py``: the reduced failure on its own, without nebisect."""
        script = self.out / "repro.py"
        return script if script.is_file() else None

    def to_json(self) -> str:
        """``nebisect bisect --json`` (summary.json)."""
        return json.dumps(self.result.to_dict(), indent=2)

    def _repr_html_(self) -> str:
        from nebisect.report.html import render_fragment
        from nebisect.report.payload import ReportPayload, Table

        r = self.result
        rows: list[list[Any]] = [
            ["target", r.target], ["signature", r.reduced_signature or r.signature],
            [r.unit + "s", f"{r.units_before} → {r.units_after}"],
            ["kept", ", ".join(r.kept_types)],
            ["state", "complete (1-minimal)" if r.complete else f"stopped: {r.stopped}"],
            ["repro", str(self.repro or "")]]
        return render_fragment(ReportPayload(f"nebisect bisect {r.source}", tables=[
            Table("reduced", ["", ""], rows)]))


class BisectKeywords(TypedDict, total=False):
    """The keywords of :func:`bisect` that are ``nebisect bisect``'s options, typed for the
    caller's checker (``tests/test_options.py`` holds them to the option table)."""

    target: str | None
    finding: str | None
    stage: str
    graph: str
    inputs: PathOption
    convert: str
    budget: int | str | None
    length: int
    max_evals: int | None
    timeout: float | None
    case_timeout: Numbers
    memory: str | int | None
    fix: Many
    cache: str | None
    out: str | os.PathLike[str]
    force: bool
    function: str


@stoppable
@api_function(BISECT)
def bisect(source: Any = None, *, example_inputs: Any = None, dynamic_dims: Any = None,
           input_domains: Any = None, progress: BisectProgress = True,
           **options: Unpack[BisectKeywords]) -> BisectReport:
    """``nebisect bisect`` (see ``nebisect bisect --help``): reduce ``source``'s failure
    on ``target`` (or the failure group ``finding`` names) and write it to ``out``.
    ``source`` may be an object of this process, as :func:`nebisect.run` takes it;
    ``function``: the function of a multifunction package that fails (else its
    default)."""
    from nebisect.executors.runner import Runner
    from nebisect.isolation.timeouts import Timeouts
    from nebisect.minimize.bisector import BisectResult, bisect_source
    from nebisect.minimize.options import BISECT_TIMEOUTS, BisectOptions
    from nebisect.options.parsers import (
        CONVERT_CHOICES,
        parse_budget,
        parse_choice,
        parse_memory,
        source_path,
    )
    from nebisect.report.outputs import fresh_output_directory
    from nebisect.sources.conversion_cache import cache_directory
    from nebisect.sources.resolve import is_torch_location
    from nebisect.targets.plugins import parse_targets

    given = keywords(BISECT, options)
    destination, target, inputs = Path(given["out"]), given["target"], given["inputs"]
    limit = parse_memory(given["memory"])
    timeouts = Timeouts.parse(items(given["case_timeout"]), BISECT_TIMEOUTS, "--case-timeout")
    def stopped(why: str) -> BisectReport:
        label = source_label(source) if source is not None else given["finding"] or ""
        return BisectReport(BisectResult.not_started(label, target or "", why), destination,
                            why)

    with stopped_with(stopped), tempfile.TemporaryDirectory(prefix="nebisect-bisect-") as tmp:
        location = ("" if source is None else
                    saved_path(source, example_inputs, declared_of(dynamic_dims, input_domains),
                               Path(tmp), timeout=timeouts.convert, memory=limit))
        subject = BisectSubject(
            location, target or "", Path(inputs) if inputs else None, given["stage"],
            given["graph"], tuple(items(given["fix"])),
            CONVERT_CHOICES[parse_choice("--convert", given["convert"], CONVERT_CHOICES)])
        if given["finding"]:
            subject = subject.with_finding(given["finding"])
        elif not location or not target:
            raise NebisectError("give a SOURCE and --target, or --finding FILE#N")
        reduction = BisectOptions(
            target=parse_targets([subject.target], timeout=BISECT_TIMEOUTS.load)[0],
            stage=subject.stage,
            inputs=os.path.abspath(subject.inputs) if subject.inputs else "",
            length=given["length"], max_evals=given["max_evals"], timeout=given["timeout"],
            fixes=subject.fixes, graph=subject.graph, paths=subject.paths,
            function=given["function"], budget=parse_budget(str(given["budget"])),
            cache=cache_directory(given["cache"] or ""),
            timeouts=timeouts)
        if not reduction.target.runs_programs and not is_torch_location(subject.source):
            raise NebisectError(f"--target {reduction.target} runs torch sources "
                                "(path/file.py:factory, model.pt2, model.pt); "
                                f"{subject.source} is not one")
        read = [("the source", source_path(subject.source)),
                *([("--inputs", subject.inputs)] if subject.inputs else [])]
        fresh_output_directory(destination, "--out", force=given["force"], inputs=read)
        with _lines(progress) as told, Runner(memory=limit, local=True) as runner:
            result = bisect_source(subject.source, reduction, destination, runner,
                                   progress=told)
        return BisectReport(result, destination)


@dataclass(frozen=True)
class BisectSubject:
    """What to bisect — the source, target and inputs — and how its failure is reached:
    the stage, the graph reduced, the converter fixes and the conversion paths."""

    source: str
    target: str
    inputs: Path | None
    stage: str
    graph: str
    fixes: tuple[str, ...]
    paths: tuple[str, ...]

    def with_finding(self, text: str) -> BisectSubject:
        """The failure group ``FILE#N`` names (``--finding``): its source, target, inputs,
        stage, graph (unless one was chosen), fixes (before the given ones) and path."""
        if self.source or self.target or self.inputs:
            raise NebisectError("--finding names the source, target and inputs; give "
                                "no SOURCE, --target or --inputs with it")
        from nebisect.detect.triggers import read_finding

        found = read_finding(text)
        trigger = found.trigger
        return BisectSubject(
            found.source, trigger.target, found.inputs,
            "convert" if trigger.stage == "convert" else self.stage,
            trigger.graph if self.graph == "auto" else self.graph,
            (*trigger.fixes, *self.fixes), (trigger.path,) if trigger.path else self.paths)


@contextmanager
def _lines(given: BisectProgress) -> Iterator[Callable[[ProgressLine], None]]:
    """``given`` as a callable of progress lines (True: their text, shown)."""
    if callable(given):
        yield given
        return
    with progress_to(given) as told:
        yield lambda line: told(line.text())

"""``nebisect.lint``: the static hazards of a program, before any prediction."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from nebisect.api.common import (
    Result,
    declared_of,
    items,
    saved_path,
    source_label,
    stoppable,
    stopped_with,
)
from nebisect.options.generate import api_function, keywords
from nebisect.options.lint_table import LINT
from nebisect.options.table import Many, Numbers

if TYPE_CHECKING:
    from nebisect.hazards.engine import LintResult
    from nebisect.hazards.records import LintFinding


@dataclass
class LintReport(Result):
    """``lint``'s findings, most severe first (``result``: the record ``--format json``
    prints); ``ok`` is its exit code 0 (no error-severity hazard). Interrupted, it holds
    no finding and says what stopped it (``interrupted``)."""

    result: LintResult
    interrupted: str = ""

    @property
    def ok(self) -> bool:
        return not self.interrupted and self.result.exit_code == 0

    @property
    def findings(self) -> list[LintFinding]:
        return self.result.findings

    def to_json(self) -> str:
        """``nebisect lint --format json``."""
        from nebisect.report import to_jsonable

        return json.dumps(to_jsonable(self.result.to_dict()), indent=2)

    def _repr_html_(self) -> str:
        from nebisect.report.html import render_fragment
        from nebisect.report.payload import ReportPayload, Table

        rows = [[f.severity, f.rule_id, f.op_name, f.op_type, f.message]
                for f in self.findings]
        table = Table(f"{len(rows)} finding(s)", ["severity", "rule", "op", "type", "hazard"],
                      rows)
        return render_fragment(ReportPayload(f"nebisect lint {self.result.source}",
                                             tables=[table]))


class LintKeywords(TypedDict, total=False):
    """The keywords of :func:`lint` that are ``nebisect lint``'s options, typed for the
    caller's checker (``tests/test_options.py`` holds them to the option table)."""

    fp16: bool
    input_range: Many
    convert: str
    converter_overrides: bool
    timeout: Numbers
    memory: str | int | None
    function: str


@stoppable
@api_function(LINT)
def lint(source: Any, *, example_inputs: Any = None, dynamic_dims: Any = None,
         input_domains: Any = None, **options: Unpack[LintKeywords]) -> LintReport:
    """``nebisect lint`` (see ``nebisect lint --help``) on ``source``: a path, or an
    object of this process as :func:`nebisect.run` takes one; ``function``: that
    function of a multifunction package (else its default)."""
    from nebisect.executors.runner import Runner
    from nebisect.hazards import lint_source, parse_input_range
    from nebisect.hazards.engine import LintResult
    from nebisect.isolation.timeouts import Timeouts
    from nebisect.options.parsers import CONVERT_CHOICES, parse_choice, parse_memory
    from nebisect.sources.convert import OVERRIDES_SETUP

    given = keywords(LINT, options)
    paths = CONVERT_CHOICES[parse_choice("--convert", given["convert"], CONVERT_CHOICES)]
    limit = parse_memory(given["memory"])
    ranges = dict(parse_input_range(text) for text in items(given["input_range"]))
    timeouts = Timeouts.parse(items(given["timeout"]))
    nothing = LintResult(source_label(source), given["fp16"], ranges)
    with stopped_with(lambda why: LintReport(nothing, why)), \
            tempfile.TemporaryDirectory(prefix="nebisect-lint-") as tmp, \
            Runner(memory=limit, local=True) as runner:
        location = saved_path(source, example_inputs, declared_of(dynamic_dims, input_domains),
                              Path(tmp), timeout=timeouts.convert, memory=limit)
        return LintReport(lint_source(
            location, isolator=runner.isolator, assume_fp16=given["fp16"], input_ranges=ranges,
            timeouts=timeouts, paths=paths,
            setup=(OVERRIDES_SETUP,) if given["converter_overrides"] else (),
            function=given["function"]))

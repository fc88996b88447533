"""``nebisect.lint``: the static hazards of a program, before any prediction."""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nebisect.api.common import Many, Result, declared_of, items, saved_path

if TYPE_CHECKING:
    from nebisect.hazards.engine import LintResult
    from nebisect.hazards.records import LintFinding


@dataclass
class LintReport(Result):
    """``lint``'s findings, most severe first (``result``: the record ``--format json``
    prints); ``ok`` is its exit code 0 (no error-severity hazard)."""

    result: LintResult

    @property
    def ok(self) -> bool:
        return self.result.exit_code == 0

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


def lint(source: Any, *, example_inputs: Any = None, dynamic_dims: Any = None,
         input_domains: Any = None, fp16: bool = False, input_range: Many = None,
         convert: str = "both", converter_overrides: bool = False, timeout: Many = None,
         memory: str | None = None, function: str = "") -> LintReport:
    """``nebisect lint`` (see ``nebisect lint --help``) on ``source``: a path, or an
    object of this process as :func:`nebisect.run` takes one; ``function``: that
    function of a multifunction package (else its default)."""
    from nebisect.executors.runner import Runner
    from nebisect.hazards import lint_source, parse_input_range
    from nebisect.isolation.timeouts import Timeouts
    from nebisect.options import CONVERT_CHOICES, parse_choice, use_memory
    from nebisect.sources.convert import OVERRIDES_SETUP

    paths = CONVERT_CHOICES[parse_choice("--convert", convert, CONVERT_CHOICES)]
    use_memory(memory)
    ranges = dict(parse_input_range(text) for text in items(input_range))
    timeouts = Timeouts.parse(items(timeout))
    with tempfile.TemporaryDirectory(prefix="nebisect-lint-") as tmp, Runner(local=True) as runner:
        location = saved_path(source, example_inputs, declared_of(dynamic_dims, input_domains),
                              Path(tmp), timeout)
        return LintReport(lint_source(
            location, isolator=runner.isolator, assume_fp16=fp16, input_ranges=ranges,
            timeouts=timeouts, paths=paths,
            setup=(OVERRIDES_SETUP,) if converter_overrides else (), function=function))

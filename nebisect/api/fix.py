"""``nebisect.fix``: graph rewrites (and converter fixes) applied to a model, saved."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Required, TypedDict, Unpack

from nebisect.api.common import Result, declared_of, items, saved_path, stoppable, stopped_with
from nebisect.errors import NebisectError
from nebisect.options.fix_table import APPLY
from nebisect.options.generate import api_function, keywords
from nebisect.options.table import Many, Numbers

if TYPE_CHECKING:
    from nebisect.fixes.base import Fix


@dataclass
class FixReport(Result):
    """The package written (``output``) and what each fix did to it: ``applied`` maps a
    fix to "applied at conversion", "N rewrite(s)", "no match" or why it does not apply.

    ``ok``: some fix changed the model; ``findings``: the fixes that did. Interrupted, it
    says what stopped it (``interrupted``) and holds no fix's outcome."""

    output: Path
    applied: dict[str, str] = field(default_factory=dict)
    changed: list[str] = field(default_factory=list)
    interrupted: str = ""

    @property
    def ok(self) -> bool:
        return not self.interrupted and bool(self.changed)

    @property
    def findings(self) -> list[str]:
        return list(self.changed)

    def to_json(self) -> str:
        return json.dumps({"output": str(self.output), "fixes": self.applied}, indent=2)

    def _repr_html_(self) -> str:
        from nebisect.report.html import render_fragment
        from nebisect.report.payload import ReportPayload, Table

        rows: list[list[Any]] = [[name, state] for name, state in self.applied.items()]
        return render_fragment(ReportPayload(f"nebisect fix → {self.output}", tables=[
            Table("fixes", ["fix", "what it did"], rows)]))


class FixKeywords(TypedDict, total=False):
    """The keywords of :func:`fix` that are ``nebisect fix apply``'s options, typed for
    the caller's checker (``tests/test_options.py`` holds them to the option table)."""

    output: Required[str | os.PathLike[str]]
    force: bool
    precision: str
    timeout: Numbers
    memory: str | int | None


@stoppable
@api_function(APPLY)
def fix(source: Any, fixes: Many, *, example_inputs: Any = None, dynamic_dims: Any = None,
        input_domains: Any = None, **options: Unpack[FixKeywords]) -> FixReport:
    """``nebisect fix apply`` (see ``nebisect fix apply --help``): ``fixes`` (names, see
    ``nebisect fix list``) applied to ``source`` — a torch source converted with the
    converter-level ones first — and the program saved as ``output``. ``source`` may be
    an object of this process, as :func:`nebisect.run` takes it."""
    from nebisect.executors.runner import Runner
    from nebisect.files import copy_directory
    from nebisect.fixes import resolve_fixes
    from nebisect.fixes.apply import fix_source
    from nebisect.isolation.timeouts import Timeouts
    from nebisect.options.parsers import parse_memory, source_path
    from nebisect.report.outputs import output_package
    from nebisect.sources.resolve import resolve_source

    given = keywords(APPLY, options)
    precision, timeout = given["precision"], given["timeout"]
    names = items(fixes)
    if not names:
        raise NebisectError("give at least one fix name and a source")
    if precision not in ("fp16", "fp32"):
        raise NebisectError(f"--precision {precision!r}: fp16 or fp32")
    destination = Path(given["output"])
    timeouts = Timeouts.parse(items(timeout))
    limit = parse_memory(given["memory"])
    with stopped_with(lambda why: FixReport(destination, interrupted=why)), \
            tempfile.TemporaryDirectory(prefix="nebisect-fix-") as tmp, \
            Runner(memory=limit, local=True) as runner:
        location = saved_path(source, example_inputs, declared_of(dynamic_dims, input_domains),
                              Path(tmp) / "source", timeout=timeouts.convert, memory=limit)
        output_package(destination, "--output", force=given["force"],
                       inputs=[("the source", source_path(location))])
        chosen = resolve_fixes(names)
        resolved = resolve_source(location, timeout=timeouts.load, isolator=runner.isolator)
        result = fix_source(resolved.kind, resolved.location, chosen, Path(tmp) / "work",
                            runner.isolator, precision=precision, timeouts=timeouts)
        if result.package is None:
            raise NebisectError(f"{result.verdict.stage} failed: {result.verdict.message}")
        copy_directory(result.package, destination)
    applied = {f.name: _state(f, result.converter_fixes, result.rewrites) for f in chosen}
    changed = [f.name for f in chosen
               if f.name in result.converter_fixes or result.rewrites.get(f.name, 0)]
    return FixReport(destination, applied, changed)


def _state(fix: Fix, converter_fixes: list[str], rewrites: dict[str, int]) -> str:
    """What ``fix`` did: applied at conversion, its rewrites, or no match."""
    if fix.level == "convert":
        return ("applied at conversion" if fix.name in converter_fixes
                else "not applicable (source is already converted)")
    count = rewrites.get(fix.name, 0)
    return f"{count} rewrite(s)" if count else "no match"

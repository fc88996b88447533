"""``nebisect lint``: static hazard scan of an ML program (text, JSON or SARIF)."""

from __future__ import annotations

import io
import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Table

from nebisect.errors import NebisectError
from nebisect.options.generate import cli_command
from nebisect.options.lint_table import LINT
from nebisect.report.safe_text import markup

if TYPE_CHECKING:
    from nebisect.hazards import LintResult

ORDER = 40
FORMATS = ("text", "json", "sarif")
_STYLE = {"error": "bold red", "warning": "yellow", "note": "cyan"}


LINT_HELP = """\
Flag fp16 range hazards, log-domain patterns, data-dependent shapes and mask
constants in a Core ML ML program before anything runs. A torch source is converted
first, in an isolated child as run converts it, and each converted program linted.

Exit code: 1 when an error-severity hazard is found, 0 otherwise, 2 on bad input.
"""

def _lint(source: str, output_format: str, output: Path | None, force: bool,
          list_rules: bool, **options: Any) -> None:
    """``nebisect lint`` (its help is :data:`LINT_HELP`): :func:`nebisect.api.lint` on
    the options as typed, the findings in the chosen format."""
    from nebisect import api
    from nebisect.options.parsers import source_path
    from nebisect.report.outputs import output_file

    if output_format not in FORMATS:
        raise NebisectError(f"--format {output_format!r}: one of {', '.join(FORMATS)}")
    if list_rules:
        _print_rules(output_format)
        return
    if not source:
        raise NebisectError("lint needs a SOURCE (.mlpackage, module:function or "
                            "path/to/file.py:factory)")
    if output is not None:
        output_file(output, "--output", force=force,
                    inputs=[("the source", source_path(source))])
    report = api.lint(source, **options)
    result = report.result
    if output_format == "sarif":
        from nebisect.report.sarif import sarif_text

        _emit(sarif_text(result), output)
    elif output_format == "json":
        _emit(report.to_json() + "\n", output)
    else:
        _print_text(result, output)
    raise typer.Exit(result.exit_code)


lint = cli_command(LINT, _lint)


def _emit(text: str, output: Path | None) -> None:
    if output is None:
        typer.echo(text, nl=False)
        return
    from nebisect.files import write_text

    write_text(output, text)


def _print_text(result: LintResult, output: Path | None) -> None:
    buffer = io.StringIO() if output else None
    console = Console(file=buffer, highlight=False, soft_wrap=True, no_color=bool(output))
    for finding in result.findings:
        style = _STYLE[finding.severity]
        console.print(
            f"[{style}]{finding.severity}[/] [bold]{finding.rule_id}[/] "
            f"{markup(finding.function)}/{markup(finding.op_name)} ({markup(finding.op_type)})"
        )
        console.print(f"  {markup(finding.message)}")
        cure = (
            f"fix: {shlex.join(['nebisect', 'fix', 'apply', finding.fix, result.source])} "
            "-o FIXED.mlpackage" if finding.fix
            else f"remedy: {finding.details.get('remedy') or _remedy(finding.rule_id)}"
        )
        console.print(f"  [dim]{markup(cure)}[/]")
    counts = result.counts()
    console.print(
        f"{len(result.findings)} finding(s): {counts['error']} error(s), "
        f"{counts['warning']} warning(s), {counts['note']} note(s)"
        + ("" if result.input_ranges else " (no --input-range: interval analysis off)")
    )
    if buffer is not None:
        _emit(buffer.getvalue(), output)


def _remedy(rule_id: str) -> str:
    from nebisect.hazards import get_rule

    return get_rule(rule_id).remedy


def _print_rules(output_format: str) -> None:
    from nebisect.hazards import registered_rules

    rules = registered_rules().values()
    if output_format != "text":
        typer.echo(json.dumps([rule.to_dict() for rule in rules], indent=2))
        return
    table = Table(title="nebisect lint rules (--format json for rationale and remedies)")
    for column in ("rule", "severity", "cured by"):
        table.add_column(column, no_wrap=True)
    table.add_column("hazard")
    table.add_column("source")
    for rule in rules:
        table.add_row(rule.id, rule.severity, rule.fix or "manual", rule.title, rule.source)
    Console().print(table)


def register(app: typer.Typer) -> None:
    app.command("lint", help=LINT_HELP)(lint)

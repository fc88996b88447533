"""``nebisect targets``: every registered target and whether it can run here."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from nebisect.targets.registry import registered_targets, spec_of

ORDER = 90


def targets(
    as_json: bool = typer.Option(False, "--json", help="Print the list as JSON."),
) -> None:
    """List every target (coreml:*, sim:*, torch:*) and why any is unavailable here."""
    rows: list[dict[str, Any]] = []
    for name, cls in sorted(registered_targets().items()):
        target = cls(spec_of(name))
        reason = target.availability()
        rows.append({
            "target": name,
            "available": reason is None,
            "precision": target.precision,
            "reason": reason or "",
            "description": (cls.__doc__ or "").strip().splitlines()[0],
        })
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title="nebisect targets")
    for column in ("target", "available", "precision", "description / why unavailable"):
        table.add_column(column)
    for row in rows:
        status = "[green]yes[/]" if row["available"] else "[red]no[/]"
        table.add_row(row["target"], status, row["precision"], row["reason"] or row["description"])
    Console().print(table)


def register(app: typer.Typer) -> None:
    app.command("targets")(targets)

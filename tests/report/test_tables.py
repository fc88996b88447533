"""Terminal tables keep cells whole: optional columns go first, rightmost first."""

from __future__ import annotations

from rich.console import Console

from nebisect.report.tables import Column, fitted_table

COLUMNS = [Column("target"), Column("verdict"), Column("cosine", "right", optional=True),
           Column("placement"), Column("max abs", "right", optional=True),
           Column("time s", "right", optional=True)]
ROWS = [["sim:fp16-naive", "[red]mismatch:collapse[/]", "0.999999", "ne 5 · cpu 1", "0.00322",
         "0.07"]]


def render(width: int, **options: object) -> tuple[str, list[str]]:
    table, dropped = fitted_table("run", COLUMNS, ROWS, width, **options)  # type: ignore[arg-type]
    console = Console(width=width, record=True)
    console.print(table)
    return console.export_text(), dropped


def test_wide_terminal_shows_every_column_on_one_line() -> None:
    text, dropped = render(120)
    assert dropped == []
    assert any(all(cell in line for cell in ("sim:fp16-naive", "mismatch:collapse", "0.07"))
               for line in text.splitlines())


def test_narrow_terminal_drops_optional_columns_rightmost_first() -> None:
    text, dropped = render(80)
    assert dropped == ["time s"]
    text, dropped = render(72)
    assert dropped == ["max abs", "time s"]
    assert "cosine" in text and "0.00322" not in text
    text, dropped = render(62)
    assert dropped == ["cosine", "max abs", "time s"]
    assert "sim:fp16-naive" in text and "mismatch:collapse" in text and "ne 5 · cpu 1" in text


def test_too_narrow_for_the_required_columns_wraps_or_becomes_blocks() -> None:
    text, dropped = render(40)
    assert dropped == ["cosine", "max abs", "time s"]
    assert "sim:fp16-naive" in text  # the first column never breaks
    text, dropped = render(40, blocks=True)
    assert dropped == []
    assert "mismatch:collapse" in text and "placement" in text and "0.00322" in text

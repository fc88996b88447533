"""Terminal tables that stay readable at 80 columns.

A cell broken across lines (``sim:fp1`` / ``6-naive``) or cut short (``sim:fp…``) is
worse than a column left out: the user can no longer tell two targets apart. So cells
stay whole, and when the terminal is too narrow for every column, the columns marked
optional are left out — the rightmost first — and named, so the user knows to widen
the terminal or ask for ``--json``. If that is still not enough, the table becomes one
field/value block per row (``blocks=True``, for few rows of long cells such as fuzz
findings), or the cells of the non-first columns wrap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text

#: what a column costs beyond its widest cell: padding and one border
_COLUMN_CHROME = 3


@dataclass(frozen=True)
class Column:
    header: str
    justify: str = "left"
    #: may be left out in a narrow terminal (the rightmost optional column goes first)
    optional: bool = False


def fitted_table(
    title: str, columns: list[Column], rows: list[list[str]], width: int, *,
    blocks: bool = False, **options: Any,
) -> tuple[Table, list[str]]:
    """The table for ``rows`` (cells may hold rich markup) and the headers left out."""
    widths = [
        max([len(column.header)] + [Text.from_markup(row[i]).cell_len for row in rows])
        + _COLUMN_CHROME
        for i, column in enumerate(columns)
    ]
    shown = list(range(len(columns)))
    droppable = [i for i in shown if columns[i].optional]
    while 1 + sum(widths[i] for i in shown) > width and droppable:
        shown.remove(droppable.pop())
    fits = 1 + sum(widths[i] for i in shown) <= width
    if blocks and not fits:  # a block has room for every column again
        return _blocks(title, [column.header for column in columns], rows, **options), []
    table = Table(title=title, **options)
    for i in shown:
        table.add_column(columns[i].header, justify=columns[i].justify,  # type: ignore[arg-type]
                         no_wrap=fits or i == 0, overflow="fold")
    for row in rows:
        table.add_row(*(row[i] for i in shown))
    dropped = [column.header for i, column in enumerate(columns) if i not in shown]
    return table, dropped


def _blocks(title: str, headers: list[str], rows: list[list[str]], **options: Any) -> Table:
    """One two-column block per row: the headers beside that row's cells."""
    table = Table(title=title, show_header=False, **{"show_lines": True, **options})
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value", overflow="fold")
    for row in rows:
        table.add_row("\n".join(headers), "\n".join(cell or "-" for cell in row))
    return table

"""Text from untrusted data, made safe to print on a terminal.

A corpus case's name, signature or directory name, an op name in a package, a verdict's
message: all come from files nebisect did not write. Printed as they are, an escape
sequence in them (``ESC [2J`` clears the screen, ``ESC ]0;…`` retitles the window, a
bidi override reorders what the reader sees) would drive the user's terminal, and a
``[red]`` would be taken for Rich markup. :func:`printable` spells such characters out
(``\\x1b``); :func:`markup` also escapes Rich markup, for text interpolated into a
string Rich renders (``console.print``, a table cell). Text pasted into an issue
(Markdown, which GitHub renders with inline HTML) goes through :func:`markdown_text`:
raw ``<img onerror=…>`` would be markup there.
"""

from __future__ import annotations

import html
import re

from rich.markup import escape

#: C0 and C1 controls, DEL, and the invisible format characters that reorder or hide
#: text (bidi embeddings, overrides and isolates, zero-width characters, BOM)
_UNPRINTABLE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


def printable(text: object) -> str:
    """``str(text)`` with every control or invisible format character written as an
    escape (``\\x1b``, ``\\u202e``)."""
    return _UNPRINTABLE.sub(_spelled, str(text))


def markup(text: object) -> str:
    """:func:`printable` text that Rich prints literally, markup-looking brackets too."""
    return escape(printable(text))


def markdown_text(text: object) -> str:
    """:func:`printable` text that Markdown shows as it is: ``&``, ``<`` and ``>`` as
    HTML entities, so no tag in it is rendered."""
    return html.escape(printable(text), quote=False)


def _spelled(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"

"""``--help`` reads well at 80 and 120 columns: docstrings reflow into paragraphs.

Rendered through the real console script, every command and subcommand: within one
paragraph of the description, only the last line may be short. Before the reflow, rich
kept the docstrings' 100-column line breaks and wrapped them again, leaving lines of one
word ("a", "torch:*") in the middle of sentences at 80 columns.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from nebisect.cli import reflow

COMMANDS = [["run"], ["bisect"], ["fuzz"], ["replay"], ["lint"], ["targets"], ["fix", "verify"],
            ["fix", "apply"], ["fix", "list"], ["corpus", "add"], ["corpus", "ls"],
            ["corpus", "gc"], ["corpus", "rm"], ["corpus", "show"]]


def description(command: list[str], width: int) -> list[list[str]]:
    """The description paragraphs of ``nebisect COMMAND --help`` at ``width`` columns."""
    env = dict(os.environ, COLUMNS=str(width), TERM="dumb", NO_COLOR="1")
    text = subprocess.run([sys.executable, "-m", "nebisect", *command, "--help"],
                          capture_output=True, text=True, env=env, check=True).stdout
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.strip().startswith("Usage:")) + 1
    end = next(i for i, ln in enumerate(lines) if ln.startswith("╭"))
    paragraphs: list[list[str]] = [[]]
    for line in lines[start:end]:
        if line.strip():
            paragraphs[-1].append(line.rstrip())
        elif paragraphs[-1]:
            paragraphs.append([])
    return [p for p in paragraphs if p]


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_no_short_line_inside_a_help_paragraph(command: list[str], width: int) -> None:
    for paragraph in description(command, width):
        for line in paragraph[:-1]:
            if line.lstrip().startswith(("* ", "- ", "• ")):
                continue
            assert len(line) > width // 2, (command, width, paragraph)


def test_reflow_joins_wrapped_lines_and_keeps_lists_and_paragraphs() -> None:
    text = "One sentence\nwrapped here.\n\nA list:\n* first\n* second\n  continued\nAfter."
    assert reflow(text) == (
        "One sentence wrapped here.\n\nA list:\n* first\n* second\n  continued\nAfter.")

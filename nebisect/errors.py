"""The one user-facing error type, below every other module so any layer may raise it.

The CLI prints a :class:`NebisectError`'s message on one line and exits 2 (usage or
input error); anything else escaping a command is a bug and says so.
"""

from __future__ import annotations


class NebisectError(Exception):
    """A user-facing error: the CLI prints its message on one line and exits 2."""


class CannotJudge(NebisectError):
    """What nebisect cannot model (an op the simulator has no kernel for, a spec feature
    it does not support): the case is not judged, and no verdict blames the model, its
    conversion or its device for it. Its message is the gap, as the report prints it
    after ``cannot judge:``."""

    PREFIX = "cannot judge: "


class ArgumentError(NebisectError):
    """A keyword of an API call whose value is of no type its option takes
    (``seed="x"``, ``target=5``): ``argument`` names the keyword, the message says what
    it takes."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(message)
        self.argument = argument

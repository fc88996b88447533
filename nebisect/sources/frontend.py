"""torch's own step of a conversion path, told apart from coremltools'.

Each conversion path starts in torch — ``torch.export`` (and its decompositions) on the
export path, ``torch.jit.trace`` on the trace path — and only then hands a program to
coremltools. A failure in torch's step (``GuardOnDataDependentSymNode``, ``Constraints
violated``, a tracer check) says the program is not exportable or not traceable as
written: the user's to change, and no converter bug. A failure after it is coremltools'.
:func:`torch_step` marks the first kind, so a conversion's message reads ``not
exportable: GuardOnDataDependentSymNode: …`` and a sweep of generated programs does not
count torch's refusals as converter failures (:func:`is_refusal`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from nebisect.isolation.job import is_out_of_memory

#: what each path's torch step failing makes of the program
REFUSALS = {"export": "not exportable", "trace": "not traceable"}


class Refused(Exception):
    """torch's step of conversion path ``path`` failed; the program never reached
    coremltools. ``__cause__`` is torch's exception."""

    def __init__(self, path: str) -> None:
        super().__init__(REFUSALS[path])


@contextlib.contextmanager
def torch_step(path: str) -> Iterator[None]:
    """The block is torch's step of ``path``: its failure is raised as :class:`Refused`
    (running out of memory stays itself: it is the memory limit's verdict)."""
    try:
        yield
    except Exception as exc:
        if is_out_of_memory(exc):
            raise
        raise Refused(path) from exc


def is_refusal(message: str) -> bool:
    """Does a conversion attempt's ``message`` say torch refused the program?"""
    return message.startswith(tuple(f"{refusal}: " for refusal in REFUSALS.values()))

"""Jobs whose needs name a warm-up hook: they report which process ran the hook."""

from __future__ import annotations

import os
from dataclasses import dataclass

from nebisect.verdict import Status, Verdict

#: pids of the processes that ran :func:`warm_up` (a forked child inherits the list)
WARMED_IN: list[int] = []


def warm_up() -> None:
    WARMED_IN.append(os.getpid())


@dataclass(frozen=True)
class NoArguments:
    """A job that takes no arguments."""


def where(payload: NoArguments) -> Verdict:
    """This child's parent (its template) and where the hook ran."""
    return Verdict(Status.PASS, "predict",
                   job_result={"template_pid": os.getppid(), "warmed_in": list(WARMED_IN)})

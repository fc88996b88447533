"""Jobs whose needs name a warm-up hook: they report which process ran the hook."""

from __future__ import annotations

import importlib
import os
import sys
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


#: optional dependencies coremltools probes for while it imports
PROBED = ("executorch", "sklearn", "transformers")


def probed_modules(payload: NoArguments) -> Verdict:
    """Which of :data:`PROBED` this child holds before the job imports them, and
    whether each then imports."""
    held = [name for name in PROBED if sys.modules.get(name) is not None]
    importable = []
    for name in PROBED:
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        importable.append(name)
    return Verdict(Status.PASS, "predict", job_result={"held": held, "importable": importable})

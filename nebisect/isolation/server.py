"""Start-up and message framing shared by the two long-lived helpers (template, worker).

Both are started fresh with ``python -m`` by the parent, in their own session, with a
JSON config argument; both talk newline-framed JSON on a request and a response pipe,
never pickle. A helper dies with its parent (PR_SET_PDEATHSIG) and ignores SIGINT: the
parent decides what a Ctrl-C means and tells its helpers by closing their request pipe.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import traceback
from typing import Any

from nebisect.imports import import_lean
from nebisect.isolation import memory
from nebisect.isolation.needs import Hold, Needs
from nebisect.isolation.osproc import orphaned, set_pdeathsig


def start_helper() -> dict[str, Any]:
    """Common start-up: parent-death signal, SIGINT ignored, the parent's sys.path, needs
    (their held calls under the isolator's memory limit)."""
    config: dict[str, Any] = json.loads(sys.argv[1])
    set_pdeathsig(signal.SIGKILL)
    if orphaned(int(config["parent"])):
        sys.exit(0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.path[:] = config["sys_path"]
    provide(Needs.from_dict(config["needs"]), int(config["memory_mb"]))
    return config


def provide(needs: Needs, memory_mb: int) -> None:
    """Give this process what ``needs`` asks for: the blocks, then the imports not made
    yet, then the held calls (each under ``memory_mb``, a job's limit). From the imports
    on, the helper itself may add at most ``memory_mb`` to its data
    (:func:`~nebisect.isolation.memory.confine`): a long-lived process is under
    ``--memory`` as a job is. A failure is logged, not fatal: the case that needs a
    module imports it again in its own process and reports the failure as its verdict,
    at the right stage."""
    for name in needs.blocked_modules():
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    for module in needs.imports:
        _import(module)
    memory.confine(memory_mb)
    for hold in needs.holds:
        _hold(hold, memory_mb)


def _import(module: str) -> None:
    if module in sys.modules:
        return
    try:
        import_lean(module)
    except Exception:
        traceback.print_exc()


def _function(name: str) -> Any:
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


def _hold(hold: Hold, memory_mb: int) -> None:
    """Make one held call under the memory limit a job gets; a failure is logged, not
    fatal (the child that needs the result builds it again and reports its own
    failure — an ``oom`` included — as its verdict)."""
    # The call may run user code (a factory), whose prints must not reach the command's
    # stdout (its JSON) or stderr, which the template shares: fds 1 and 2 go to
    # /dev/null meanwhile, for native writes too.
    saved = [os.dup(fd) for fd in (1, 2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd in (1, 2):
            os.dup2(devnull, fd)
        with memory.limited(memory_mb):
            _function(hold.function)(hold.argument)
    except Exception:
        failure = traceback.format_exc()
    else:
        failure = ""
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in zip((1, 2), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)
        os.close(devnull)
    if failure:
        print(failure, file=sys.stderr)


_prepared: set[str] = set()


def prepare_job(job: dict[str, Any]) -> bool:
    """Import a job's module and run the warm-up hooks its needs name
    (:attr:`~nebisect.isolation.needs.Needs.warm`), each once; True when something was
    new (a child forked before has neither)."""
    module = job["function"].partition(":")[0]
    steps = [module, *Needs.from_dict(job.get("needs", {})).warm]
    new = [step for step in steps if step not in _prepared]
    _prepared.update(new)
    for step in new:
        if step == module:
            _import(module)
            continue
        try:
            _function(step)()
        except Exception:
            traceback.print_exc()
    return bool(new)


def send(fd: int, message: dict[str, Any]) -> None:
    data = (json.dumps(message) + "\n").encode()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]

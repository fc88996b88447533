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

from nebisect.isolation import memory
from nebisect.isolation.osproc import orphaned, set_pdeathsig


def start_helper() -> dict[str, Any]:
    """Common start-up: parent-death signal, SIGINT ignored, the parent's sys.path and
    memory limit, preloads."""
    config: dict[str, Any] = json.loads(sys.argv[1])
    set_pdeathsig(signal.SIGKILL)
    if orphaned(int(config["parent"])):
        sys.exit(0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.path[:] = config["sys_path"]
    if config.get("memory_mb"):
        memory.configure(int(config["memory_mb"]) * memory.MIB)
    preload(config["preload"])
    return config


#: ``"!torch"`` in a preload list keeps these out of a helper unless some other entry of
#: the same list asks for ``torch`` itself: importing coremltools otherwise drags in
#: torch (about 400 MB, seconds of CPU), which a simulator-only child never touches and
#: which makes every fork copy a far larger process. coremltools imports transformers
#: and scipy only to note that they are installed; with torch blocked they are another
#: 26 MB and 360 modules, which every fork copies (page tables) and every exit tears down:
#: 7.0 → 3.6 ms per fork + exit of a simulator template on a 2-core VM.
BLOCK_GROUPS: dict[str, tuple[str, ...]] = {
    "torch": ("torch", "torchvision", "torchaudio", "torchao", "executorch"),
    "sklearn": ("sklearn",),
    "transformers": ("transformers",),
    "scipy": ("scipy",),
}


def preload(modules: list[str]) -> None:
    """Import modules not imported yet; a failure is logged, not fatal.

    Entries ``"@module:function=argument"`` are calls made after the imports
    (:data:`CALL`). Entries ``"!name"`` block a heavy optional dependency (see :data:`BLOCK_GROUPS`)
    unless the list also names it; blocked modules raise ImportError when imported,
    and coremltools treats them as not installed. The case that needs a module imports
    it again in its own process and reports the failure as its verdict, at the right
    stage.
    """
    wanted = [m for m in modules if not m.startswith(("!", CALL))]
    for blocked in (m[1:] for m in modules if m.startswith("!")):
        if blocked not in wanted:
            for name in BLOCK_GROUPS.get(blocked, (blocked,)):
                sys.modules.setdefault(name, None)  # type: ignore[arg-type]
    for module in wanted:
        if module in sys.modules:
            continue
        try:
            importlib.import_module(module)
        except Exception:
            traceback.print_exc()
    for call in (m for m in modules if m.startswith(CALL)):
        warm_call(call)


#: ``"@package.module:function=argument"`` in a preload list: after the imports, the
#: template calls ``function(argument)`` once, so that every child it forks inherits
#: what the call built (a torch source's module, held by the warm reference template).
CALL = "@"


def warm_call(entry: str) -> None:
    """Run one :data:`CALL` entry under the memory limit a job gets; a failure is logged,
    not fatal (the child that needs the result builds it again and reports its own
    failure — an ``oom`` included — as its verdict)."""
    name, _, argument = entry[len(CALL):].partition("=")
    module, _, function = name.partition(":")
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
        with memory.limited(memory.limit_mb()):
            getattr(importlib.import_module(module), function)(argument)
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


#: A job module may define this function; a fork template calls it once, after the
#: module's import, to load what every job of the module reads lazily (registries), so
#: that each forked child inherits it instead of importing it again.
WARM_UP = "warm_up"
_prepared: set[str] = set()


def prepare_job_module(name: str) -> bool:
    """Import a job's module and run its :data:`WARM_UP` hook, if it has one, once;
    True the first time (a child forked before has neither)."""
    if name in _prepared:
        return False
    _prepared.add(name)
    preload([name])
    warm_up = getattr(sys.modules.get(name), WARM_UP, None)
    if callable(warm_up):
        try:
            warm_up()
        except Exception:
            traceback.print_exc()
    return True


def send(fd: int, message: dict[str, Any]) -> None:
    data = (json.dumps(message) + "\n").encode()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]

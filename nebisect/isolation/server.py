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

from nebisect.isolation.osproc import orphaned, set_pdeathsig


def start_helper() -> dict[str, Any]:
    """Common start-up: parent-death signal, SIGINT ignored, the parent's sys.path, preloads."""
    config: dict[str, Any] = json.loads(sys.argv[1])
    set_pdeathsig(signal.SIGKILL)
    if orphaned(int(config["parent"])):
        sys.exit(0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.path[:] = config["sys_path"]
    preload(config["preload"])
    return config


def preload(modules: list[str]) -> None:
    """Import modules not imported yet; a failure is logged, not fatal.

    The case that needs a module imports it again in its own process and reports the
    failure as its verdict, at the right stage.
    """
    for module in modules:
        if module in sys.modules:
            continue
        try:
            importlib.import_module(module)
        except Exception:
            traceback.print_exc()


def send(fd: int, message: dict[str, Any]) -> None:
    data = (json.dumps(message) + "\n").encode()
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]

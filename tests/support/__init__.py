"""What the tests share that is not a fixture: fault jobs, plugins, program builders, paths.

``tests/`` is on ``sys.path`` (``pythonpath`` in pyproject.toml), so a test imports
``from support.corpus_helpers import ...``; isolated children get the parent's
``sys.path``, so a job named ``support.fault_jobs:segfault`` resolves there too.
"""

from __future__ import annotations

from pathlib import Path

#: this folder: plugins and factories that tests hand to nebisect by file path
SUPPORT = Path(__file__).resolve().parent
#: the tests folder (what a child needs on ``sys.path`` to import ``support.*``)
TESTS = SUPPORT.parent
#: the repository root: examples/, corpus/, nebisect/
REPO = TESTS.parent

#: Python source that gives a child the signals of a terminal session: SIGINT raising
#: KeyboardInterrupt (Ctrl-C), SIGHUP and SIGTERM at their defaults. A shell without job
#: control starts a background job with SIGINT *ignored*, ``nohup`` (or a CI harness)
#: starts its command with SIGHUP ignored, and every process below inherits that — and
#: nebisect rightly leaves a signal it was started with ignored alone: a test that
#: signals a child must not depend on how the suite itself was started.
TERMINAL_SIGNALS = ("import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
                    "signal.signal(signal.SIGHUP, signal.SIG_DFL); "
                    "signal.signal(signal.SIGTERM, signal.SIG_DFL)")

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

#: Python source that gives a child Ctrl-C as a terminal does (SIGINT raising
#: KeyboardInterrupt). A shell without job control starts a background job with SIGINT
#: *ignored*, and every process below inherits that: a test that presses Ctrl-C on a
#: child must not depend on how the suite itself was started.
TERMINAL_SIGINT = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)"

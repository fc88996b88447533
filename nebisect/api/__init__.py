"""nebisect's Python API: the commands as functions, for notebooks and scripts.

``nebisect.run`` is what ``nebisect run`` does — the CLI is a thin layer over it (it
parses the same options, calls this, prints the result) — so a notebook and a terminal
get the same findings and the same JSON. Keyword arguments are named like the CLI's
options (``target``, ``lengths``, ``budget``, ``input_range``, …) and take either the
CLI's text (``lengths="1,8"``) or Python values (``lengths=[1, 8]``, ``lengths=8``,
``timeout=30`` seconds, ``memory=2 << 30`` bytes); each function's docstring says what
each keyword takes. A value of no type a keyword takes raises
:class:`~nebisect.errors.ArgumentError` naming it (``.argument``); a bad value of the
right type the :class:`~nebisect.errors.NebisectError` with the CLI's one-line message.
Nothing here raises ``SystemExit``. Each command's function lives in the module named after the
command (``api/run.py``, ``api/bisect.py``, ``api/fix.py``, …), beside the
:mod:`nebisect.commands` module of the same name that prints it.

**A crash is a verdict.** Every prediction and conversion runs in an isolated child, and
a model that lives in the caller's process is exported or traced in a fork of it
(:mod:`nebisect.sources.capture`): a SIGSEGV in Core ML, in a converter or in the
module's own ``forward`` is a ``crash:SIGSEGV`` row of the result, and the notebook
kernel lives on. The fork is bounded as every child is: ``memory`` (past it: ``oom``),
the convert ``timeout``, and what ``forward`` starts is killed with it.

**What the caller's process is left with.** While a function runs in the main thread,
SIGTERM and SIGHUP left at their default stop it as Ctrl-C does — temporary directories
and processes cleaned up, :class:`~nebisect.api.common.Stopped` raised with the result so
far — and their default is restored when it returns; handlers the caller installed are
left alone. Two things outlast a call, on purpose: on Linux the process is a *child
subreaper* from the first isolated child on (``prctl(PR_SET_CHILD_SUBREAPER)``, so that
what a case leaves behind is re-parented to it and killed; an orphan of the caller's own
children is re-parented to it too, and is the caller's to reap), and one idle daemon
thread, ``nebisect-launcher``, starts nebisect's helper processes (a helper dies with
the thread that started it). Nothing else of the process changes: not the
working directory, the environment, torch's thread count or the signal handlers.

The source may be what the CLI takes (a path: ``.mlpackage``, ``file.py:factory``,
``.pt2``, TorchScript) or an object: an ``nn.Module`` (with ``example_inputs``, and
optionally ``dynamic_dims``, ``input_domains``, ``masked_outputs`` as a factory declares
them), a ``torch.export.ExportedProgram``, a TorchScript module or a coremltools
``MLModel``. An object is saved first, into a temporary directory removed after the
run. An ExecuTorch program (``.pte``) runs each of its Core ML delegates.
"""

from nebisect.api.bisect import BisectReport, bisect
from nebisect.api.common import Result, Stopped, save_torchscript
from nebisect.api.fix import FixReport, fix
from nebisect.api.fuzz import FuzzReport, fuzz
from nebisect.api.lint import LintReport, lint
from nebisect.api.replay import ReplayReport, replay
from nebisect.api.run import ProgramsResult, RunResult, run

__all__ = ["BisectReport", "FixReport", "FuzzReport", "LintReport", "ProgramsResult",
           "ReplayReport", "Result", "RunResult", "Stopped",
           "bisect", "fix", "fuzz", "lint", "replay", "run", "save_torchscript"]

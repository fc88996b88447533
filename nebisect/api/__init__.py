"""nebisect's Python API: the commands as functions, for notebooks and scripts.

``nebisect.run`` is what ``nebisect run`` does — the CLI is a thin layer over it (it
parses the same options, calls this, prints the result) — so a notebook and a terminal
get the same findings and the same JSON. Keyword arguments are named like the CLI's
options (``target``, ``lengths``, ``budget``, ``input_range``, …) and take either the
CLI's text (``lengths="1,8"``) or Python values (``lengths=[1, 8]``). A bad argument
raises :class:`~nebisect.errors.NebisectError` with the CLI's one-line message; nothing
here raises ``SystemExit``. Each command's function lives in the module named after the
command (``api/run.py``, ``api/bisect.py``, ``api/fix.py``, …), beside the
:mod:`nebisect.commands` module of the same name that prints it.

**A crash is a verdict.** Every prediction and conversion runs in an isolated child, and
a model that lives in the caller's process is exported or traced in a fork of it
(:mod:`nebisect.sources.capture`): a SIGSEGV in Core ML, in a converter or in the
module's own ``forward`` is a ``crash:SIGSEGV`` row of the result, and the notebook
kernel lives on.

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

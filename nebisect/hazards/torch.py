"""Lint a torch source (``path/to/file.py:factory``): convert it as ``run`` does, lint the
converted programs.

The factory and the conversion are user code and run in isolated children
(:func:`~nebisect.sources.resolve.resolve_source`, :func:`~nebisect.sources.convert.
convert_paths`, with the same ``setup`` as ``run --converter-overrides``), and so are
reading and linting the saved packages (:mod:`nebisect.hazards.isolated`, forked from the
conversion's warm template). The programs are converted at fp16 — coremltools' default for
ML programs, and what the Neural Engine computes — on every path asked for; when more
than one converts, each finding's function is named by its path
(``torch.export:main``). A source that does not convert is one line carrying the
converter's message, which names ``--converter-overrides`` when those cure it.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from nebisect.case import PACKAGE, SourceRef
from nebisect.errors import NebisectError
from nebisect.hazards.engine import LintResult
from nebisect.hazards.graph import Range
from nebisect.hazards.isolated import lint_isolated
from nebisect.hazards.records import SEVERITIES
from nebisect.isolate import Isolator
from nebisect.isolation.timeouts import Timeouts
from nebisect.sources.convert import PATH_LABELS, convert_paths
from nebisect.sources.converter_overrides import overrides_hint
from nebisect.sources.resolve import resolve_source
from nebisect.sources.torch_module import TORCH_AND_COREMLTOOLS

#: the precision torch sources are converted at for linting
PRECISION = "fp16"


def lint_torch(source: str, *, assume_fp16: bool, input_ranges: dict[str, Range],
               timeouts: Timeouts, paths: tuple[str, ...], isolator: Isolator,
               setup: tuple[str, ...] = ()) -> LintResult:
    """The findings of every program ``source`` converts to on ``paths``, most severe
    first (its children run on the caller's ``isolator``)."""
    with tempfile.TemporaryDirectory(prefix="nebisect-lint-") as tmp:
        resolved = resolve_source(source, timeout=timeouts.load, isolator=isolator)
        packages, verdict = convert_paths(resolved, PRECISION, Path(tmp), isolator, paths=paths,
                                          setup=setup, timeout=timeouts.convert)
        if not packages:
            cure = "" if setup else overrides_hint(verdict.message)
            raise NebisectError(f"{source} does not convert "
                                f"({verdict.message or verdict.signature})"
                                + (f"; {cure}" if cure else ""))
        findings = []
        for path, package in packages.items():
            found = lint_isolated(SourceRef(PACKAGE, str(package)), source=source,
                                  assume_fp16=assume_fp16, input_ranges=input_ranges,
                                  timeout=timeouts.load, needs=TORCH_AND_COREMLTOOLS,
                                  isolator=isolator).findings
            findings += found if len(packages) == 1 else [
                replace(f, function=f"{PATH_LABELS[path]}:{f.function}") for f in found]
    findings.sort(key=lambda f: SEVERITIES.index(f.severity))
    return LintResult(source, assume_fp16, dict(input_ranges), findings)

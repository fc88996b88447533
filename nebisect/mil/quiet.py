"""Keep coremltools' and torch's import chatter and progress bars away from the user.

coremltools prints "Failed to load _MLModelProxy" on Linux, warns that the torch
version is untested, and draws tqdm bars for every conversion pass. None of that is
the user's business unless they ask with ``--verbose``; ``VERBOSE`` is set by the CLI.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from typing import Any

from nebisect.imports import import_lean

VERBOSE = False


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Silence Python-level stdout/stderr, warnings and library loggers for a block.

    fd-level output from native code is left alone: isolated children capture fd 2
    to a file, and that is where native crash reports must go.
    """
    if VERBOSE:
        yield
        return
    loggers = [logging.getLogger(n) for n in ("coremltools", "torch", "transformers")]
    levels = [lg.level for lg in loggers]
    with open(os.devnull, "w") as sink, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for lg in loggers:
            lg.setLevel(logging.ERROR)
        old_out, old_err = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = sink
        try:
            yield
        finally:
            sys.stdout, sys.stderr = old_out, old_err
            for lg, level in zip(loggers, levels, strict=True):
                lg.setLevel(level)


def import_coremltools() -> Any:
    """Import coremltools once, quietly, with its tqdm progress bars disabled and
    without the optional dependencies it only probes for
    (:data:`~nebisect.imports.PROBED_AT_IMPORT`)."""
    os.environ.setdefault("TQDM_DISABLE", "0" if VERBOSE else "1")
    with quiet():
        return import_lean("coremltools")

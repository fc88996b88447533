"""Importing a library without the optional dependencies it only probes for.

Some libraries try, while they import, every optional dependency they could work with,
and import each one found — seconds of work for features nebisect never calls through
them. :func:`import_lean` hides those for the length of the import only: the library
takes them for absent, and anything that imports one afterwards (a user's factory) gets
the real module.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from types import ModuleType

#: Optional dependencies a module probes for while it imports, which nebisect never uses
#: through it: coremltools tries executorch (for its EXECUTORCH frontend, which nebisect
#: does not call), scikit-learn (its sklearn converters) and transformers (a flag nothing
#: reads). They are most of its import: 10.3–11.0 s against 4.3–5.6 s with them hidden,
#: torch included, on a 2-core VM — paid by every template that converts or runs a
#: torch reference. :func:`import_lean` hides them for the import only, so user code
#: (a factory) that imports one afterwards gets the real module.
PROBED_AT_IMPORT: dict[str, tuple[str, ...]] = {
    "coremltools": ("executorch", "sklearn", "transformers"),
}


def import_lean(module: str) -> ModuleType:
    """Import ``module`` with the optional dependencies it probes for
    (:data:`PROBED_AT_IMPORT`) hidden for the length of the import, unless they are
    already imported; afterwards they import normally."""
    if module in sys.modules:
        return importlib.import_module(module)
    top = module.partition(".")[0]
    hidden = [name for name in PROBED_AT_IMPORT.get(top, ()) if name not in sys.modules]
    with _hidden(hidden):
        return importlib.import_module(module)


@contextlib.contextmanager
def _hidden(names: list[str]) -> Iterator[None]:
    for name in names:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in names:
            if sys.modules.get(name, "") is None:
                del sys.modules[name]

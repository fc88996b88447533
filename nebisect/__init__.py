"""nebisect: find, isolate, minimize and guard against crashes and numeric cliffs in Core ML.

The package is the Python API's front door: ``nebisect.run(...)`` and the other
commands as functions (:mod:`nebisect.api`), imported on first use — ``import
nebisect`` stays cheap for the isolated children, which import nebisect's modules and
never the API.
"""

from __future__ import annotations

from typing import Any

from nebisect.errors import ArgumentError, NebisectError
from nebisect.version import __version__

__all__ = ["ArgumentError", "NebisectError", "__version__"]


def __getattr__(name: str) -> Any:
    """The API's names (``nebisect.run``, …: :data:`nebisect.api.__all__`), imported
    on first use."""
    import nebisect.api as api

    if name in api.__all__:
        return getattr(api, name)
    raise AttributeError(f"module 'nebisect' has no attribute {name!r}")

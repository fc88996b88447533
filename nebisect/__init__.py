"""nebisect: find, isolate, minimize and guard against crashes and numeric cliffs in Core ML.

The package is the Python API's front door: ``nebisect.run(...)`` and the other
commands as functions (:mod:`nebisect.api`), imported on first use — ``import
nebisect`` stays cheap for the isolated children, which import nebisect's modules and
never the API.
"""

from __future__ import annotations

from typing import Any

from nebisect.errors import NebisectError
from nebisect.version import __version__

#: the names the API exports, each from :mod:`nebisect.api`
API = ("run", "RunResult", "RunStopped", "save_torchscript")

__all__ = ["NebisectError", "__version__", *API]


def __getattr__(name: str) -> Any:
    if name in API:
        from nebisect import api

        return getattr(api, name)
    raise AttributeError(f"module 'nebisect' has no attribute {name!r}")

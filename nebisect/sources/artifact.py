"""Artifacts: the model a case runs, resolved lazily so a child imports only what it needs.

``mlpackage`` — a path to an ML program package (``function``: which one of a
multifunction package's); ``builder`` — ``module:function``
called with the JSON ``params`` and returning a coremltools MIL ``Program`` (the
fuzzer's one-op programs, minimized repros); ``torch`` — ``path/file.py:factory``
(see ``nebisect.sources.torch_module``).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from nebisect.case import SourceRef
from nebisect.errors import NebisectError

ARTIFACT_KINDS = ("mlpackage", "builder", "torch")


@dataclass
class Artifact:
    kind: str
    location: str
    params: dict[str, Any] = field(default_factory=dict)
    function: str = ""

    @classmethod
    def of(cls, ref: SourceRef, params: dict[str, Any] | None = None) -> Artifact:
        """The artifact of the model ``ref`` names."""
        return cls(ref.kind, ref.location, dict(params or {}), ref.function)

    def __post_init__(self) -> None:
        if self.kind not in ARTIFACT_KINDS:
            raise NebisectError(f"unknown artifact kind {self.kind!r}")

    @property
    def ref(self) -> SourceRef:
        """The model it names."""
        return SourceRef(self.kind, self.location, self.function)

    @cached_property
    def program(self) -> Any:
        """The coremltools MIL Program of an mlpackage or builder artifact."""
        if self.ref.is_package:
            from nebisect.isolation import memory
            from nebisect.mil.load import load_program

            return load_program(self.location, self.function, memory_budget=memory.budget())
        if self.ref.is_builder:
            module, _, function = self.location.partition(":")
            if not function:
                raise NebisectError(f"builder {self.location!r} must be module:function")
            return getattr(importlib.import_module(module), function)(**self.params)
        raise NebisectError("a torch source has no MIL program before conversion")

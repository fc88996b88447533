"""The target interface: one class per backend family, registered by spec name.

A target executes a model artifact on some backend and returns its outputs plus, where
the backend can tell, where each op ran. Targets must not import heavy optional
dependencies (torch, Core ML) at module import time: ``availability()`` reports why a
target cannot run here, and the CLI lists it instead of failing at start-up.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from nebisect.errors import NebisectError
from nebisect.isolate import Needs
from nebisect.targets.spec import TargetSpec


@dataclass
class Prediction:
    """What a target returns for one set of inputs.

    ``placement`` maps op name → device (``ne``, ``cpu``, ``gpu``) where the backend
    reports it; ``op_types`` maps op name → MIL op type so callers can find the op of
    interest; ``intermediates`` holds every named value when requested (bisection).
    ``placement_unknown`` says why the placement cannot be asserted (a compute plan
    that this OS does not offer, or one that describes another input shape); ``notes``
    are what the target did to the inputs on the way (a dtype cast), for the verdict.
    ``fallbacks`` maps op name → why the op ran off the target's accelerator, where the
    backend can tell (the simulator's device profile; Core ML's compute plan does not).
    ``state`` holds a stateful model's states as the prediction left them (empty for a
    model without state, or a target that cannot read them).
    """

    outputs: dict[str, np.ndarray]
    placement: dict[str, str] = field(default_factory=dict)
    op_types: dict[str, str] = field(default_factory=dict)
    intermediates: dict[str, np.ndarray] = field(default_factory=dict)
    placement_unknown: str = ""
    notes: list[str] = field(default_factory=list)
    fallbacks: dict[str, str] = field(default_factory=dict)
    state: dict[str, np.ndarray] = field(default_factory=dict)


class TargetSkipped(NebisectError):
    """The target cannot judge this case here, for a stated reason (a model that needs
    a newer OS): the case is ``skipped``, not failed."""


class Target(ABC):
    """A place where programs execute; constructed from its parsed spec."""

    #: What a child that runs this target's programs must have in its process.
    needs: ClassVar[Needs] = Needs(imports=("numpy",))

    def __init__(self, spec: TargetSpec) -> None:
        self.spec = spec

    @property
    def name(self) -> str:
        return str(self.spec)

    @property
    def precision(self) -> str:
        return self.spec.precision

    def availability(self) -> str | None:
        """None when the target can run here, else a one-line reason."""
        return None

    def load(self, model: Any) -> None:
        """Prepare ``model`` (an :class:`~nebisect.sources.artifact.Artifact`) for
        prediction where that needs no inputs — a case runs this at stage ``load``, so
        a model that cannot be loaded is an ``error`` there. Default: nothing (the
        prediction loads the model itself)."""
        return None

    @abstractmethod
    def predict(
        self, model: Any, inputs: dict[str, np.ndarray], *, intermediates: bool = False
    ) -> Prediction:
        """Run ``model`` (a :class:`nebisect.sources.artifact.Artifact`) on ``inputs``."""

    def predict_steps(
        self, model: Any, inputs: dict[str, np.ndarray], steps: int, *,
        intermediates: bool = False,
    ) -> Iterator[Prediction]:
        """Up to ``steps`` successive predictions on ``inputs`` with the model's state
        carried from each to the next (a decode loop), yielded one by one. Default: one
        prediction — a target that carries no state between predictions would repeat it.
        A target that does carry state stops after the first when the model has none."""
        yield self.predict(model, inputs, intermediates=intermediates)

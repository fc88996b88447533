"""Test-only targets, imported by isolated children through ``--plugin`` / case options."""

from __future__ import annotations

import ctypes
import os
from typing import Any

import numpy as np

from nebisect.targets.base import Prediction, Target
from nebisect.targets.registry import register_target


@register_target("sim:segv-in-predict")
class SegfaultingTarget(Target):
    """Test target: prints a line to fd 2, then dereferences NULL like a crashing driver."""

    base_spec = "sim:fp16"

    def predict(
        self, model: Any, inputs: dict[str, np.ndarray], *, intermediates: bool = False
    ) -> Prediction:
        os.write(2, b"segv-target: Espresso-like failure, dereferencing NULL\n")
        ctypes.string_at(0)
        raise AssertionError("unreachable: the NULL dereference kills the process")


@register_target("sim:needs-newer-os")
class NewerOSTarget(Target):
    """Test target: refuses every model as a real Core ML refuses one of a newer spec."""

    base_spec = "sim:fp16"

    def predict(
        self, model: Any, inputs: dict[str, np.ndarray], *, intermediates: bool = False
    ) -> Prediction:
        from nebisect.sources.deployment import newer_os_needed
        from nebisect.targets.base import TargetSkipped

        raise TargetSkipped(newer_os_needed(9, 8))

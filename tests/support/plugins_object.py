"""Test-only target, imported by isolated children through ``--plugin``: it predicts
exactly what ``sim:fp32`` predicts, but hands its outputs back as object-dtype arrays."""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.targets.base import Prediction, Target
from nebisect.targets.registry import get_target, register_target


@register_target("sim:object-out")
class ObjectOutputTarget(Target):
    """Test target: right numbers, wrong container (``dtype=object``)."""

    base_spec = "sim:fp32"

    def predict(
        self, model: Any, inputs: dict[str, np.ndarray], *, intermediates: bool = False
    ) -> Prediction:
        real = get_target("sim:fp32").predict(model, inputs)
        return Prediction({name: np.asarray(value).astype(object)
                           for name, value in real.outputs.items()})

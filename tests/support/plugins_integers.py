"""Test-only device whose integer outputs pass through float32 (issue #23, exact integers).

A converter or device that routes an int32 through float32 returns 2^24 for 2^24 + 1:
``sim:fp32-int-via-fp32`` is ``sim:fp32`` with every integer output cast to float32 and
back, so ``run`` must report ``mismatch:integer`` there. Imported in the isolated
children through the case's ``plugins`` option (and ``--plugin``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.targets.base import Prediction
from nebisect.targets.registry import register_target
from nebisect.targets.sim import SimFP32


@register_target("sim:fp32-int-via-fp32")
class IntegersThroughFloat32(SimFP32):
    """Test target: sim:fp32 whose integer outputs are rounded to float32 and back."""

    base_spec = "sim:fp32"

    def predict(self, model: Any, inputs: dict[str, np.ndarray], *,
                intermediates: bool = False) -> Prediction:
        prediction = super().predict(model, inputs, intermediates=intermediates)
        prediction.outputs = {
            name: value.astype(np.float32).astype(value.dtype)
            if np.asarray(value).dtype.kind in "iu" else value
            for name, value in prediction.outputs.items()}
        return prediction

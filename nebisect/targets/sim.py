"""Simulator targets: the MIL interpreter under each precision model and device profile.

They run anywhere (no Core ML), take builder programs and ``.mlpackage`` artifacts
alike, and report intermediates on request so bisection can find the first op that
diverges. Nothing heavy is imported here; the interpreter is imported on first predict.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.targets import register_target
from nebisect.targets.base import Prediction, Target


class _SimTarget(Target):
    """Shared predict: ``run_program`` with this target's precision and profile."""

    #: "!name": heavy packages a simulator child never needs (see isolation.server).
    preload = ("numpy", "!torch", "!sklearn", "!transformers", "!scipy", "coremltools",
               "nebisect.mil.interp")
    sim_precision = "fp64"
    sim_profile: str | None = None

    def predict(
        self, model: Any, inputs: dict[str, np.ndarray], *, intermediates: bool = False
    ) -> Prediction:
        from nebisect.mil.interp import run_program

        program = model.program if hasattr(model, "program") else model
        result = run_program(
            program,
            inputs,
            self.sim_precision,
            profile=self.sim_profile,
            intermediates=intermediates,
        )
        return Prediction(
            outputs=result.outputs,
            placement=result.placement,
            op_types=result.op_types,
            intermediates=result.intermediates,
        )


@register_target("sim:fp64")
class SimFP64(_SimTarget):
    """MIL simulator, float64 everywhere (fp16 casts are identities): the oracle."""

    sim_precision = "fp64"


@register_target("sim:fp32")
class SimFP32(_SimTarget):
    """MIL simulator, float32 compute and storage (a CPU-only device)."""

    sim_precision = "fp32"


@register_target("sim:fp16")
class SimFP16(_SimTarget):
    """MIL simulator, fp16 storage with each op computed in fp32 (a careful fp16 device)."""

    sim_precision = "fp16"


@register_target("sim:fp16-naive")
class SimFP16Naive(_SimTarget):
    """MIL simulator, fp16 arithmetic by textbook formulas (no max-shift, fp16 sums)."""

    sim_precision = "fp16-naive"


@register_target("sim:ane")
class SimANE(_SimTarget):
    """MIL simulator with the Neural Engine profile (published behaviour, not the silicon)."""

    sim_precision = "fp16"
    sim_profile = "ane"

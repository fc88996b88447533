"""A target whose predict dereferences NULL: Core ML's crash on a machine without one.

On a Mac, ``coreml:ne`` with a dynamic sequence length can take the process down with
SIGSEGV inside Espresso (seed 003); here, where Core ML cannot run, this target stands
in for it: the fp16 simulator's model, then the same NULL dereference. Load it as a
plugin — it is imported only in nebisect's isolated children::

    nebisect run examples/logsumexp_ne.py:model -t sim:fp32 -t sim:segv-demo \\
        --plugin examples/crashing_target.py
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from nebisect.targets.base import Prediction, Target
from nebisect.targets.registry import register_target


@register_target("sim:segv-demo")
class SegfaultingPredict(Target):
    """Dereferences NULL in ``predict``, as a crashing Core ML driver does."""

    base_spec = "sim:fp16"

    def predict(
        self, model: Any, inputs: dict[str, np.ndarray], *, intermediates: bool = False
    ) -> Prediction:
        ctypes.string_at(0)
        raise AssertionError("unreachable: the NULL dereference ends the process")

"""State kernels (iOS 18 ``ct.StateType``): ``read_state`` and ``coreml_update_state``.

A state is a main-function input of a state type that Core ML keeps between
predictions (a KV cache, a running sum). The interpreter binds each state input to a
:class:`StateCell` — initialised to zeros, as Core ML's ``make_state()`` does, or to the
value the previous prediction left — and these kernels read and write it. The cell
holds its value as the precision model stores the state's declared dtype: fp16 under
``fp16`` and the Neural Engine profile (a running sum rounds and overflows there as on
the device), float64 under the ``fp64`` oracle.

The serialized program writes a state with ``write_state`` (and reads the copy back
with ``read_state``); coremltools' milproto loader turns that pair into one
``coreml_update_state``, so a loaded program never holds a ``write_state`` op and
``coreml_update_state`` is the kernel that runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel


@dataclass
class StateCell:
    """One state during a prediction: its current ``value`` and ``hold``, which turns a
    written value into the state's storage (its dtype, rounded to fp16 where stored so)."""

    value: np.ndarray
    hold: Callable[[Any], np.ndarray]

    def write(self, value: Any) -> None:
        self.value = self.hold(value)


@kernel("read_state")
def read_state(ctx: KernelContext, input: StateCell) -> np.ndarray:
    return input.value


@kernel("coreml_update_state")
def coreml_update_state(ctx: KernelContext, state: StateCell, value: np.ndarray) -> np.ndarray:
    """Write ``value`` into the state and return it (the op's output is the copy)."""
    state.write(value)
    return value

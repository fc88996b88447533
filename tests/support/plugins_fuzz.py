"""Test-only device for the fuzzer: a simulated fp16 device whose reduce_max drops NaN.

Metal's ``max`` is IEEE maxNum: ``max(acc, NaN)`` keeps ``acc``, so a max reduction that
starts from −inf turns [1, NaN, 3] into 3 and an all-NaN row into −inf. Imported in the
isolated children through the case's ``plugins`` option (and ``--plugin``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels.reduction import axes_of, keep
from nebisect.mil.profiles import Profile, register_profile
from nebisect.targets.registry import register_target
from nebisect.targets.sim import SimFP16

register_profile(Profile(
    name="nan-suppressing", label="test device whose max reduction drops NaN",
    precision="fp16", variant="nan-suppressing", device="gpu",
    device_float_dtypes=frozenset({"fp16", "fp32"}), cpu_op_types=frozenset(),
    rejects_data_dependent_shapes=False,
))


@kernel("reduce_max", variant="nan-suppressing")
def nan_dropping_max(ctx: KernelContext, x: np.ndarray, axes: Any = None,
                     keep_dims: Any = None) -> np.ndarray:
    """fmax-reduce from −inf: NaN never wins, an all-NaN row gives −inf."""
    fmax_reduce: Any = np.fmax.reduce
    return fmax_reduce(x, axis=axes_of(x, axes), keepdims=keep(keep_dims), initial=-np.inf)


@register_target("sim:fp16-nan-suppressing")
class NanSuppressingTarget(SimFP16):
    """Test target: careful fp16 everywhere except a NaN-dropping reduce_max."""

    base_spec = "sim:fp16"
    sim_profile = "nan-suppressing"

"""``sim:ane`` — a model of the Apple Neural Engine's *published* behaviour, not of the silicon.

Everything here is an observation someone reported with a reproducer; each carries its
source. Nothing is inferred from hardware documentation Apple does not publish.

* Precision: the Neural Engine computes float16 only; float32-typed ops run on CPU (or
  GPU) instead. Source: coremltools guide "Typed Execution Workflow Example" ("convert
  again to a float 32 typed model. This will execute on a combination of the GPU and
  CPU"); "the ANE appears to use float16 for everything" (M. Hollemans,
  github.com/hollance/neural-engine, docs/16-bit.md). So an op runs on the Neural
  Engine only when every float it reads or writes is fp16 — integer-only shape
  arithmetic falls back too. Accelerator ops use the ``fp16`` precision model; CPU
  fallback ops compute in float32 and store as declared.
* ``reduce_log_sum_exp`` is lowered without max-shift and returns 0.0 once Σexp(x)
  overflows fp16: 32 equal channels collapse at x ≈ 7.6313, where
  log(65504 / 32) = 7.6241 predicts (seed 000; coremltools issue #2690). The kernel
  below sums exp(x) exactly, rounds the sum to fp16 and returns 0.0 where that is inf,
  so the cliff sits at the fp16 overflow point itself.
* ``softplus`` collapses to 0.0 past ln 2^15 ≈ 10.397 (fine sweep: passes at 10.394,
  collapses at 10.395 — coremltools issue #2687; the same data in seed 000's cross-op
  table). An fp16 input passes at 10.390625 and collapses at the next fp16 number,
  10.3984375 (exp = 32808 > 2^15).
* A tensor whose shape depends on data (a symbolic dimension no input binds) is
  rejected at predict time with "Invalid blob shape: Data-dependent shapes were
  disabled: <var> - [?, N]" on non-CPU compute units (seed 003, masked mean-pool with
  a dynamic sequence length; CPU_ONLY runs it correctly; the same message from a
  DiT's ``[2, ?, 1152]`` in eai-lab/On-device-Sora issue #6).
* A tensor whose shape follows a flexible input dimension (``RangeDim``: every symbol
  in it is an input's, e.g. a conv's ``is0 - 2``) is not data dependent: Core ML runs
  the model at any length in range, off the Neural Engine — "a model with RangeDim
  input runs on the Neural Engine only with the default shape", a two-conv model at
  other lengths runs on CPU (coremltools issue #2370, 2024); "I've exported a model
  that requires a flexible input shape ... This model doesn't use the ANE at all, and
  only runs on CPU" (coremltools issue #1764); "with only default shape ... of the
  input, the model runs on ANE" (coremltools issue #835). Such ops are placed on the
  CPU (placement reason ``flexible shape``), never failed. The default-shape exception
  is not modelled: the simulator places a flexible program the same at every length.
* CPU fallback op types: control flow and list ops, whose trip counts and lengths are
  data dependent, and ``non_zero``, whose output shape is data dependent (the class of
  tensor seed 003 shows the accelerator refusing). This list is an assumption drawn
  from seed 003, not a published placement table.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.mil.kernels import KernelContext, kernel
from nebisect.mil.kernels.activation import stable_softplus
from nebisect.mil.kernels.reduction import axes_of, keep, reduce_log_sum_exp
from nebisect.mil.profiles import Profile, register_profile

#: Softplus on the Neural Engine fails once exp(x) exceeds 2^15 (coremltools #2687).
SOFTPLUS_EXP_LIMIT = 2.0**15

ANE = register_profile(
    Profile(
        name="ane",
        label="Apple Neural Engine — a model of published behaviour, not of the silicon",
        precision="fp16",
        variant="ane",
        device="ne",
        device_float_dtypes=frozenset({"fp16"}),
        cpu_op_types=frozenset(
            {
                "cond",
                "while_loop",
                "make_list",
                "list_length",
                "list_read",
                "list_write",
                "list_gather",
                "list_scatter",
                "non_zero",
            }
        ),
        rejects_data_dependent_shapes=True,
        flexible_shapes_on_cpu=True,
    )
)


@kernel("reduce_log_sum_exp", variant="ane")
def reduce_log_sum_exp_ane(
    ctx: KernelContext, x: np.ndarray, axes: Any = None, keep_dims: Any = None
) -> Any:
    """log Σ exp(x) with no max-shift; 0.0 where the fp16 sum overflows (seed 000, #2690).

    Only the overflow is modelled: where the sum fits, the result is the accurate one
    (computed max-shifted in float64), so that no behaviour nobody reported — such as
    float64's own exp underflow below −745 — shows up as a device cliff.
    """
    wide = x.astype(np.float64)
    total = np.sum(np.exp(wide), axis=axes_of(x, axes), keepdims=keep(keep_dims))
    overflow = np.isinf(np.asarray(total).astype(np.float16))
    return np.where(overflow, 0.0, reduce_log_sum_exp(ctx, wide, axes, keep_dims))


@kernel("softplus", variant="ane")
def softplus_ane(ctx: KernelContext, x: np.ndarray) -> np.ndarray:
    """softplus, collapsing to 0.0 where exp(x) > 2^15 (coremltools #2687)."""
    collapsed = np.exp(x.astype(np.float64)) > SOFTPLUS_EXP_LIMIT
    return np.where(collapsed, ctx.dtype(0), stable_softplus(x))

"""The Core ML runtime's published rules, one per public report (see :mod:`.rules`).

Each rule quotes its report: the op and the trigger, the stage and units where the
report names them, and the runtime's error text verbatim (masked only where the report
masks it). A rule's predicate reads the MIL op as coremltools builds it: input values
that are constant, declared dtypes and shapes (a symbolic dim never triggers a rule that
needs its size). A test in ``tests/mil/test_runtime_rules.py`` rebuilds each published
trigger with coremltools' MIL builder.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.mil.dtypes import var_element_dtype
from nebisect.mil.kernels.pool import ceil_overhang
from nebisect.mil.semantics.rules import COMPUTE_UNITS, runtime_rule


def _value(op: Any, name: str) -> Any:
    """The constant value of input ``name`` (None: absent or computed at run time)."""
    var = op.inputs.get(name)
    return None if var is None else var.val


def _static_shape(var: Any) -> tuple[int, ...] | None:
    """``var``'s shape when every dim is a known integer, else None."""
    shape = getattr(var, "shape", None)
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return tuple(shape)


@runtime_rule(
    "pad-outer-dims-non-constant",
    op_type="pad",
    trigger="mode 'reflect' or 'replicate' with non-zero padding outside the last two dims",
    stage="load",
    units=COMPUTE_UNITS,
    message='Error compiling model: "Failed to parse the model specification. Error: Unable '
    "to parse ML Program: in operation {op}: Padding for more than two dimensions only "
    'supports `constant` mode".',
    source="coremltools issues #2576, #2571, PR #2701; executorch #11708, #11709",
    remedy="pad the outer dims one at a time with the dim moved last (transpose, pad, "
    "transpose back: PR #2701's lowering), or use constant padding there",
)
def pad_outer_dims_non_constant(op: Any) -> bool:
    """PR #2701 enumerates the runtime's rule on a rank-5 input: padding axes 3 and 4 loads,
    any non-zero pad on axis 0-2 is rejected, "identical for reflect and replicate"."""
    if _value(op, "mode") not in ("reflect", "replicate"):
        return False
    pad = _value(op, "pad")
    if pad is None:
        return True  # padding known only at run time: nothing keeps it to the last two dims
    return bool(np.any(np.asarray(pad)[:-4]))


@runtime_rule(
    "linear-integer",
    op_type="linear",
    trigger="an integer (int32) input x, as coremltools 9.0 lowers torch.mm / torch.bmm by a "
    "constant integer matrix",
    stage="plan",
    units=COMPUTE_UNITS,
    message="Failed to build the model execution plan using a model architecture file "
    "'<path>/model.mil' with error code: -14.",
    source="coremltools issue #2575, PR #2673; executorch #11691",
    remedy="compute the product with matmul (PR #2673 lowers integer torch.mm that way), or "
    "in floating point and round",
)
def linear_integer(op: Any) -> bool:
    dtype = var_element_dtype(op.inputs["x"])
    return dtype is not None and dtype.kind in "iu"


@runtime_rule(
    "avg-pool-ceil-overhang",
    op_type="avg_pool",
    trigger="ceil_mode=True with a last window hanging past the padded input, padding "
    "included in the average",
    stage="predict",
    units=COMPUTE_UNITS,
    message="the runtime divides a ceil_mode window hanging past the input by the whole "
    "kernel size, the definition (and PyTorch) by the positions it covers",
    source="coremltools issue #2772, PR #2844",
    remedy="convert with exclude_padding_from_average=True when the pooling has no "
    "explicit padding (PR #2844's fix), or pad the input so that no window overhangs",
    refuses=False,
)
def avg_pool_ceil_overhang(op: Any) -> bool:
    if not _value(op, "ceil_mode") or _value(op, "exclude_padding_from_average"):
        return False
    shape = _static_shape(op.inputs["x"])
    if shape is None:
        return True  # the overhang depends on a size known only at run time
    overhang = ceil_overhang(shape[2:], _value(op, "kernel_sizes"), _value(op, "strides"),
                             _value(op, "pad_type"), _value(op, "pad"))
    return any(overhang)

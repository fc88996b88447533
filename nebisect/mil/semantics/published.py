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

from nebisect.mil.kernels.pool import ceil_overhang
from nebisect.mil.semantics.rules import UNITS, runtime_rule


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
    "avg-pool-ceil-overhang",
    op_type="avg_pool",
    trigger="ceil_mode=True with a last window hanging past the padded input, padding "
    "included in the average",
    stage="predict",
    units=UNITS,
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

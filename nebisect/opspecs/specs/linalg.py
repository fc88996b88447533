"""Linear algebra: matmul, linear, conv, conv_transpose.

Weights are seeded constants (MIL requires const weights for linear and conv); only the
activations are program inputs, so value strategies and cliff families act on them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from hypothesis import strategies as st

from nebisect.mil.dtypes import FP16_MAX
from nebisect.opspecs.emit import seeded
from nebisect.opspecs.ops import Boundary, op_spec
from nebisect.opspecs.shapes import shapes

CONV_CLASS = ("depthwise", "pad_type", "stride")
_SIDE = st.one_of(st.integers(1, 8), st.sampled_from((16, 32)))


def _dot_bound(case: dict[str, Any]) -> list[Boundary]:
    k = case["params"].get("inner")
    if not k:  # a symbolic inner dimension: no closed-form bound
        return []
    return [Boundary(f"65504/{k}", FP16_MAX / k,
                     "a k-term dot product of values ≤ 1 in magnitude overflows fp16",
                     "65504/k")]


def _static(dims: Any) -> int | None:
    """The product of ``dims`` when every one is a known integer (else None)."""
    sizes = [int(d) if isinstance(d, int | np.integer) else None for d in dims]
    return None if None in sizes else math.prod(s for s in sizes if s is not None)


def _weight_inner(op: Any) -> dict[str, Any]:
    """linear and conv: a weight ``[out, in/groups, *kernel]`` sums ``in/groups · kernel``
    terms per output."""
    return {"inner": _static(op.inputs["weight"].shape[1:])}


def _matmul_inner(op: Any) -> dict[str, Any]:
    transposed = op.inputs.get("transpose_x")
    shape = op.inputs["x"].shape
    if not shape:
        return {"inner": None}
    axis = -2 if transposed is not None and bool(transposed.val) and len(shape) > 1 else -1
    return {"inner": _static([shape[axis]])}


@st.composite
def _matmul_cases(draw: st.DrawFn, dtype: str) -> dict[str, Any]:
    batch = draw(shapes(0, 2, max_size=8))
    m, k, n = draw(_SIDE), draw(_SIDE), draw(_SIDE)
    tx, ty = draw(st.booleans()), draw(st.booleans())
    x = [*batch, *((k, m) if tx else (m, k))]
    y_batch = batch[draw(st.integers(0, len(batch))):]
    y = [*y_batch, *((n, k) if ty else (k, n))]
    return {"inputs": {"x": x, "y": y},
            "params": {"transpose_x": tx, "transpose_y": ty, "inner": k}}


@op_spec("matmul", family="linalg", cases=_matmul_cases, boundaries=_dot_bound,
         class_keys=("transpose_x", "transpose_y"), params_of=_matmul_inner)
def _matmul(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
    """MIL matmul of two inputs (batched, broadcast, optionally transposed)."""
    return mb.matmul(x=inputs["x"], y=inputs["y"], transpose_x=params["transpose_x"],
                     transpose_y=params["transpose_y"])


@st.composite
def _linear_cases(draw: st.DrawFn, dtype: str) -> dict[str, Any]:
    lead = draw(shapes(0, 2, max_size=16))
    k = draw(_SIDE)
    return {"inputs": {"x": [*lead, k]}, "params": {
        "inner": k, "out": draw(_SIDE), "bias": draw(st.booleans()),
        "seed": draw(st.integers(0, 255)),
    }}


@op_spec("linear", family="linalg", cases=_linear_cases, boundaries=_dot_bound,
         class_keys=("bias",), params_of=_weight_inner)
def _linear(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
    """MIL linear with a seeded constant weight (and bias)."""
    weight = seeded([params["out"], params["inner"]], params["seed"], dtype)
    bias = {"bias": seeded([params["out"]], params["seed"] + 1, dtype)} if params["bias"] else {}
    return mb.linear(x=inputs["x"], weight=weight, **bias)


@st.composite
def _conv_cases(draw: st.DrawFn, dtype: str) -> dict[str, Any]:
    spatial = draw(st.lists(st.integers(1, 12), min_size=1, max_size=2))
    c_in = draw(st.integers(1, 8))
    kernel = [draw(st.integers(1, side)) for side in spatial]
    depthwise = draw(st.booleans())
    return {"inputs": {"x": [1, c_in, *spatial]}, "params": {
        "inner": math.prod(kernel) if depthwise else c_in * math.prod(kernel),
        "out": c_in if depthwise else draw(st.integers(1, 8)),
        "depthwise": depthwise,
        "kernel": kernel,
        "stride": draw(st.integers(1, 2)),
        "pad_type": draw(st.sampled_from(("valid", "same"))),
        "seed": draw(st.integers(0, 255)),
    }}


def _groups(inputs: dict[str, Any], params: dict[str, Any]) -> int:
    return int(inputs["x"].shape[1]) if params["depthwise"] else 1


def _conv_weight(inputs: dict[str, Any], params: dict[str, Any], dtype: str,
                 transpose: bool) -> Any:
    c_in = inputs["x"].shape[1]
    groups = _groups(inputs, params)
    shape = [c_in, params["out"] // groups] if transpose else [params["out"], c_in // groups]
    return seeded([*shape, *params["kernel"]], params["seed"], dtype)


@op_spec("conv", family="linalg", cases=_conv_cases, boundaries=_dot_bound,
         class_keys=CONV_CLASS, params_of=_weight_inner)
def _conv(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
    """MIL conv (1-D/2-D, plain or depthwise) with a seeded constant weight."""
    rank = len(params["kernel"])
    return mb.conv(
        x=inputs["x"], weight=_conv_weight(inputs, params, dtype, transpose=False),
        strides=[params["stride"]] * rank, pad_type=params["pad_type"],
        groups=_groups(inputs, params),
    )


@op_spec("conv_transpose", family="linalg", cases=_conv_cases, class_keys=CONV_CLASS)
def _conv_transpose(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
    """MIL conv_transpose (1-D/2-D) with a seeded constant weight."""
    rank = len(params["kernel"])
    return mb.conv_transpose(
        x=inputs["x"], weight=_conv_weight(inputs, params, dtype, transpose=True),
        strides=[params["stride"]] * rank, pad_type=params["pad_type"],
        groups=_groups(inputs, params),
    )

"""Activations: softmax, softplus, sigmoid, tanh, silu, gelu and the parametric ones.

Boundaries name where a textbook fp16 lowering overflows: exp(x) past log(65504),
softmax's Σexp without max-shift past log(65504/n), and the Neural Engine's softplus
cliff at ln 2^15 (coremltools #2687).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from nebisect.mil.dtypes import FP16_MAX
from nebisect.opspecs.emit import seeded, unary
from nebisect.opspecs.ops import LN_FP16_MAX, Boundary, fixed, op_spec
from nebisect.opspecs.shapes import axis_cases, reduced_size, shapes, unary_with

GELU_MODES = ("EXACT", "TANH_APPROXIMATION", "SIGMOID_APPROXIMATION")
ALPHAS = st.sampled_from((0.01, 0.1, 0.5, 1.0, 2.0))
BETAS = st.sampled_from((0.5, 1.0, 2.0, 3.0))
EXP_OVERFLOW = Boundary("log(65504)", LN_FP16_MAX, "exp(x) overflows fp16")
EXP_NEG_OVERFLOW = Boundary("-log(65504)", -LN_FP16_MAX, "exp(-x) overflows fp16")


_PLAIN: dict[str, tuple[Callable[[dict[str, Any]], list[Boundary]], tuple[float, ...]]] = {
    "softplus": (fixed(
        Boundary("ln 2^15", math.log(2.0**15), "Neural Engine softplus cliff (coremltools #2687)"),
        EXP_OVERFLOW,
    ), (math.log(2.0**15),)),
    "sigmoid": (fixed(EXP_NEG_OVERFLOW), ()),
    "silu": (fixed(EXP_NEG_OVERFLOW), ()),
    "tanh": (fixed(Boundary("log(65504)/2", LN_FP16_MAX / 2,
                             "exp(2x) of the textbook formula overflows fp16")), ()),
    "relu": (fixed(), ()),
    "relu6": (fixed(), ()),
    "softsign": (fixed(Boundary("65503", FP16_MAX - 1, "1+|x| overflows fp16")), ()),
}
for _name, (_bounds, _hints) in _PLAIN.items():
    op_spec(_name, family="activation", cases=unary_with(), boundaries=_bounds, hints=_hints)(
        unary(_name)
    )

_PARAMETRIC: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "elu": {"alpha": ALPHAS},
    "leaky_relu": {"alpha": ALPHAS},
    "thresholded_relu": {"alpha": ALPHAS},
    "sigmoid_hard": {"alpha": ALPHAS, "beta": st.sampled_from((0.0, 0.5))},
    "clamped_relu": {"alpha": ALPHAS, "beta": st.sampled_from((1.0, 6.0))},
    "scaled_tanh": {"alpha": ALPHAS, "beta": BETAS},
    "linear_activation": {"alpha": ALPHAS, "beta": st.sampled_from((0.0, 1.0, -1.0))},
}
for _name, _params in _PARAMETRIC.items():
    op_spec(_name, family="activation", cases=unary_with(**_params))(unary(_name, *_params))


def _gelu_bounds(case: dict[str, Any]) -> list[Boundary]:
    mode = case["params"]["mode"]
    if mode == "TANH_APPROXIMATION":
        return [Boundary("65504^(1/3)", FP16_MAX ** (1 / 3), "x³ overflows fp16")]
    if mode == "SIGMOID_APPROXIMATION":
        return [Boundary("-log(65504)/1.702", -LN_FP16_MAX / 1.702,
                         "exp(-1.702x) overflows fp16")]
    return []


@op_spec(
    "gelu", family="activation", boundaries=_gelu_bounds,
    cases=unary_with(mode=st.sampled_from(GELU_MODES)),
)
def _gelu(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
    """MIL gelu in its three modes (exact, tanh and sigmoid approximations)."""
    return mb.gelu(x=inputs["x"], mode=params["mode"])


def _softmax_bounds(case: dict[str, Any]) -> list[Boundary]:
    c = reduced_size(case)
    return [Boundary(f"log(65504/{c})", math.log(FP16_MAX / c),
                     "Σexp(x) over n equal values overflows fp16 without the max-shift",
                     "log(65504/n)"), EXP_OVERFLOW]


@op_spec("softmax", family="activation", boundaries=_softmax_bounds,
         cases=lambda dtype: axis_cases(dtype))
def _softmax(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
    """MIL softmax along one axis."""
    return mb.softmax(x=inputs["x"], axis=params["axis"])


@st.composite
def _channel_cases(draw: st.DrawFn, dtype: str, min_rank: int, max_rank: int) -> dict[str, Any]:
    shape = draw(shapes(min_rank, max_rank))
    return {"inputs": {"x": shape}, "params": {"seed": draw(st.integers(0, 255))}}


@op_spec("prelu", family="activation", cases=lambda dtype: _channel_cases(dtype, 4, 4))
def _prelu(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
    """MIL prelu with a seeded per-channel alpha (rank-4 input, channels on axis 1)."""
    channels = inputs["x"].shape[1]
    return mb.prelu(x=inputs["x"], alpha=seeded([channels], params["seed"], dtype, 0.0, 1.0))


@op_spec("softplus_parametric", family="activation",
         cases=lambda dtype: _channel_cases(dtype, 3, 4),
         boundaries=fixed(EXP_OVERFLOW))
def _softplus_parametric(
    mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str
) -> Any:
    """MIL softplus_parametric with seeded per-channel alpha and beta."""
    channels = inputs["x"].shape[1]
    return mb.softplus_parametric(
        x=inputs["x"],
        alpha=seeded([channels], params["seed"], dtype, 0.5, 2.0),
        beta=seeded([channels], params["seed"] + 1, dtype, 0.5, 2.0),
    )

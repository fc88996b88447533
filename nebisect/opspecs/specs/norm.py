"""Normalizations: layer_norm, l2_norm, batch_norm, instance_norm, local_response_norm.

The predicted boundary is where a variance or norm computed as Σx² in fp16 overflows
for n equal values of magnitude x: sqrt(65504/n), its law.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from nebisect.mil.dtypes import FP16_MAX
from nebisect.opspecs.emit import scalar, seeded
from nebisect.opspecs.ops import Boundary, op_spec
from nebisect.opspecs.shapes import normalize_axes, shapes

NORM_EPSILONS = st.sampled_from((1e-5, 1e-3))


def _square_sum(elements: Callable[[dict[str, Any]], int]) -> Callable[..., list[Boundary]]:
    def bounds(case: dict[str, Any]) -> list[Boundary]:
        c = elements(case)
        return [Boundary(f"sqrt(65504/{c})", math.sqrt(FP16_MAX / c),
                         "Σx² over the n normalized elements overflows fp16",
                         "sqrt(65504/n)")]

    return bounds


def _layer_size(case: dict[str, Any]) -> int:
    shape = case["inputs"]["x"]
    return math.prod(shape[a] for a in normalize_axes(case["params"]["axes"], len(shape)))


@st.composite
def _layer_cases(draw: st.DrawFn, dtype: str) -> dict[str, Any]:
    shape = draw(shapes(1, 4))
    rank = len(shape)
    axes = draw(st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
    return {"inputs": {"x": shape}, "params": {
        "axes": sorted(axes), "affine": draw(st.booleans()), "seed": draw(st.integers(0, 255)),
        "epsilon": draw(NORM_EPSILONS),
    }}


@op_spec("layer_norm", family="norm", cases=_layer_cases, boundaries=_square_sum(_layer_size))
def _layer_norm(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
    """MIL layer_norm over an axis subset, optionally with seeded gamma and beta."""
    x = inputs["x"]
    axes = params["axes"]
    affine: dict[str, Any] = {}
    if params["affine"]:
        shape = [x.shape[a] for a in normalize_axes(axes, len(x.shape))]
        affine = {"gamma": seeded(shape, params["seed"], dtype, 0.5, 1.5),
                  "beta": seeded(shape, params["seed"] + 1, dtype)}
    return mb.layer_norm(x=x, axes=axes, epsilon=scalar(params["epsilon"], dtype), **affine)


@st.composite
def _rank_cases(draw: st.DrawFn, dtype: str, low: int, high: int, **extra: Any) -> dict[str, Any]:
    shape = draw(shapes(low, high))
    params = {"seed": draw(st.integers(0, 255))}
    params.update({key: draw(strategy) for key, strategy in extra.items()})
    return {"inputs": {"x": shape}, "params": params}


def _ranked(low: int, high: int, **extra: Any) -> Callable[[str], st.SearchStrategy[Any]]:
    return lambda dtype: _rank_cases(dtype, low, high, **extra)


@op_spec("l2_norm", family="norm", cases=_ranked(3, 4, epsilon=NORM_EPSILONS),
         boundaries=_square_sum(lambda case: math.prod(case["inputs"]["x"][-3:])))
def _l2_norm(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
    """MIL l2_norm over the last three axes."""
    return mb.l2_norm(x=inputs["x"], epsilon=scalar(params["epsilon"], dtype))


@op_spec("batch_norm", family="norm", cases=_ranked(3, 5, epsilon=NORM_EPSILONS))
def _batch_norm(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
    """MIL batch_norm with seeded per-channel statistics (channels on axis 1)."""
    channels = [inputs["x"].shape[1]]
    seed = params["seed"]
    return mb.batch_norm(
        x=inputs["x"],
        mean=seeded(channels, seed, dtype),
        variance=seeded(channels, seed + 1, dtype, 0.1, 2.0),
        gamma=seeded(channels, seed + 2, dtype, 0.5, 1.5),
        beta=seeded(channels, seed + 3, dtype),
        epsilon=scalar(params["epsilon"], dtype),
    )


@op_spec("instance_norm", family="norm", cases=_ranked(3, 4, epsilon=NORM_EPSILONS),
         boundaries=_square_sum(lambda case: math.prod(case["inputs"]["x"][2:])))
def _instance_norm(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
    """MIL instance_norm over the spatial axes with seeded gamma and beta."""
    channels = [inputs["x"].shape[1]]
    return mb.instance_norm(
        x=inputs["x"],
        gamma=seeded(channels, params["seed"], dtype, 0.5, 1.5),
        beta=seeded(channels, params["seed"] + 1, dtype),
        epsilon=scalar(params["epsilon"], dtype),
    )


@op_spec("local_response_norm", family="norm",
         cases=_ranked(3, 4, size=st.sampled_from((1, 3, 5))))
def _local_response_norm(
    mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str
) -> Any:
    """MIL local_response_norm across channels with a window of 1, 3 or 5."""
    return mb.local_response_norm(x=inputs["x"], size=params["size"])

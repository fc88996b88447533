"""Index and scan ops: cumsum, topk, argsort, gather, gather_along_axis, pooling.

Index-producing ops (topk, argsort) are judged on their integer outputs too: with
fp16-exact inputs, target and reference see the same ties.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from nebisect.mil.dtypes import FP16_MAX
from nebisect.opspecs.emit import seeded_indices
from nebisect.opspecs.ops import Boundary, op_spec
from nebisect.opspecs.shapes import axis_cases, reduced_size, shapes, single_axis


def _cumsum_bound(case: dict[str, Any]) -> list[Boundary]:
    n = reduced_size(case)
    return [Boundary(f"65504/{n}", FP16_MAX / n, "the running sum of n equal values overflows",
                     "65504/n")]


@op_spec("cumsum", family="tensor", boundaries=_cumsum_bound,
         cases=lambda dtype: axis_cases(
             dtype, params={"exclusive": st.booleans(), "reverse": st.booleans()},
             lowest_axis=-1,  # coremltools rejects cumsum axes below -1
         ))
def _cumsum(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
    """MIL cumsum along one axis (inclusive/exclusive, forward/reverse)."""
    return mb.cumsum(x=inputs["x"], axis=params["axis"], exclusive=params["exclusive"],
                     reverse=params["reverse"])


@st.composite
def _topk_cases(draw: st.DrawFn, dtype: str) -> dict[str, Any]:
    shape = draw(shapes(1, 4))
    axis = draw(single_axis(len(shape)))
    k = draw(st.integers(1, shape[axis]))
    return {"inputs": {"x": shape},
            "params": {"axis": axis, "k": k, "ascending": draw(st.booleans())}}


@op_spec("topk", family="tensor", cases=_topk_cases, class_keys=("axis", "ascending"),
         outputs=2)
def _topk(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
    """MIL topk: the k largest (or smallest) values along an axis and their indices."""
    return mb.topk(x=inputs["x"], k=params["k"], axis=params["axis"],
                   ascending=params["ascending"])


@op_spec("argsort", family="tensor",
         cases=lambda dtype: axis_cases(dtype, params={"ascending": st.booleans()}))
def _argsort(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
    """MIL argsort along one axis."""
    return mb.argsort(x=inputs["x"], axis=params["axis"], ascending=params["ascending"])


@st.composite
def _gather_cases(draw: st.DrawFn, dtype: str, along: bool) -> dict[str, Any]:
    shape = draw(shapes(1, 3))
    axis = draw(single_axis(len(shape)))
    if along:
        index_shape = [*shape]
        index_shape[axis] = draw(st.integers(1, 8))
    else:
        index_shape = draw(shapes(1, 2, max_size=16))
    return {"inputs": {"x": shape},
            "params": {"axis": axis, "indices": index_shape, "seed": draw(st.integers(0, 255))}}


@op_spec("gather", family="tensor", cases=lambda dtype: _gather_cases(dtype, along=False))
def _gather(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
    """MIL gather of seeded constant indices along one axis."""
    x = inputs["x"]
    upper = x.shape[params["axis"]]
    return mb.gather(x=x, indices=seeded_indices(params["indices"], params["seed"], upper),
                     axis=params["axis"])


@op_spec("gather_along_axis", family="tensor",
         cases=lambda dtype: _gather_cases(dtype, along=True))
def _gather_along_axis(
    mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str
) -> Any:
    """MIL gather_along_axis with seeded constant indices of the input's rank."""
    x = inputs["x"]
    upper = x.shape[params["axis"]]
    return mb.gather_along_axis(
        x=x, indices=seeded_indices(params["indices"], params["seed"], upper),
        axis=params["axis"],
    )


@st.composite
def _pool_cases(draw: st.DrawFn, dtype: str) -> dict[str, Any]:
    spatial = draw(st.lists(st.integers(1, 12), min_size=1, max_size=2))
    channels = draw(st.integers(1, 8))
    return {"inputs": {"x": [1, channels, *spatial]}, "params": {
        "kernel": [draw(st.integers(1, side)) for side in spatial],
        "stride": draw(st.integers(1, 2)),
        "pad_type": draw(st.sampled_from(("valid", "same"))),
    }}


def _pool(name: str) -> Any:
    def emit(mb: Any, inputs: dict[str, Any], params: dict[str, Any], dtype: str) -> Any:
        rank = len(params["kernel"])
        return getattr(mb, name)(x=inputs["x"], kernel_sizes=params["kernel"],
                                 strides=[params["stride"]] * rank, pad_type=params["pad_type"])

    emit.__doc__ = f"MIL {name} over 1-D or 2-D windows."
    return emit


for _name in ("avg_pool", "max_pool", "l2_pool"):
    op_spec(_name, family="tensor", cases=_pool_cases)(_pool(_name))

"""Constant folding versus run time: coremltools' ``value_inference`` against the kernels.

coremltools folds an op whose inputs are all constant with its numpy ``value_inference``
at conversion time; the same op with a runtime input is computed by Core ML at predict
time. Where the two disagree (``mod`` of operands with opposite signs, coremltools PR
#2778), a model's numbers depend on whether an input happened to be constant. This
module runs every foldable MIL op over a grid of constant inputs through both:
coremltools' fold (the op built by :func:`nebisect.mil.single_op.build_op` carries it)
and the simulator's kernel under a semantics (``coreml``: the runtime; ``spec``: the
definition, which must reproduce the fold). The differential test asserts the list of
disagreements; ``nebisect lint`` flags programs that contain the ops concerned.

Grids: every op whose only required inputs are ``x`` (or ``x`` and ``y``) runs on
:data:`FLOATS` (the outer product of it with itself for two operands), the integer and
bool grids where the op takes them; the other foldable ops run their cases in
:data:`CASES`. Ops with nothing to compute at run time (``const``, control flow, list
ops) are in :data:`NOT_RUNTIME`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from nebisect.mil.dtypes import var_element_dtype
from nebisect.mil.semantics import get_semantics
from nebisect.mil.single_op import build_op, inferred_outputs, run_kernel

#: Halves, signs, zero, a base of 2: where rounding, sign and fast-path rules show.
FLOATS = np.array([-7.0, -2.5, -1.5, -1.0, -0.5, 0.0, 0.5, 1.5, 2.0, 2.5, 7.0], np.float32)
INTS = np.array([-7, -2, -1, 0, 1, 2, 7], np.int32)
NONZERO_INTS = INTS[INTS != 0]  # integer division by zero is undefined on both sides
BOOLS = np.array([False, True])
#: Foldable ops that compute nothing at predict time, or whose operand is not a tensor.
NOT_RUNTIME = frozenset({"const", "_const_symbolic", "cond", "list_length"})
#: Integer division and remainder: their integer grids leave out a zero divisor.
_DIVISIONS = frozenset({"floor_div", "mod", "real_div"})
_LOGICAL = frozenset({"logical_and", "logical_or", "logical_xor", "logical_not"})
#: Ops in CASES whose cases are elementwise grids (a disagreement names its operands).
_GRID_CASES = frozenset({"pow"})

_M = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
_I = np.array([[1, 0, 2], [0, 2, 1]], np.int32)
#: Inputs of the foldable ops the generic grids cannot build.
CASES: dict[str, list[dict[str, Any]]] = {
    "cast": [{"x": FLOATS, "dtype": d} for d in ("int32", "fp16", "bool")],
    "band_part": [{"x": _M, "lower": np.int32(1), "upper": np.int32(0)}],
    "clamped_relu": [{"x": FLOATS, "alpha": np.float32(0.1), "beta": np.float32(2.0)}],
    "clip": [{"x": FLOATS, "alpha": np.float32(-1.5), "beta": np.float32(2.0)}],
    "concat": [{"values": [_M, _M], "axis": 1}],
    "einsum": [{"values": [_M.reshape(1, 2, 1, 3), _M.T.reshape(1, 3, 1, 2)],
                "equation": "nchw,nwhu->nchu"}],
    "elu": [{"x": FLOATS, "alpha": np.float32(0.5)}],
    "expand_dims": [{"x": _M, "axes": [0, -1]}],
    "flatten2d": [{"x": _M[None], "axis": np.int32(2)}],
    "fill": [{"shape": np.array([2, 3], np.int32), "value": np.float32(-2.5)}],
    "fill_like": [{"ref_tensor": _M, "value": np.float32(1.5)}],
    "gather": [{"x": _M, "indices": np.array([2, 0, -1], np.int32), "axis": 1}],
    "gather_along_axis": [{"x": _M, "indices": _I, "axis": 1}],
    "l2_norm": [{"x": _M[None]}],
    "layer_norm": [{"x": _M, "axes": np.array([1], np.int32), "epsilon": np.float32(1e-5)}],
    "leaky_relu": [{"x": FLOATS, "alpha": np.float32(0.1)}],
    "linear": [{"x": _M, "weight": _M, "bias": np.array([0.5, -1.0], np.float32)}],
    "linear_activation": [{"x": FLOATS, "alpha": np.float32(-2.0), "beta": np.float32(0.5)}],
    "pad": [{"x": _M, "pad": np.array([1, 0, 0, 2], np.int32), "mode": m}
            for m in ("constant", "reflect", "replicate")],
    "pow": [{"x": FLOATS[:, None], "y": FLOATS[None, :]}, {"x": np.float32(2.0), "y": FLOATS}],
    "prelu": [{"x": np.stack([_M, -_M])[None], "alpha": np.array([0.1, 0.3], np.float32)}],
    "quantize": [{"input": FLOATS, "scale": np.float32(0.5), "output_dtype": "int8"}],
    "range_1d": [{"start": np.float32(-2.5), "end": np.float32(3.0), "step": np.float32(1.5)},
                 {"start": np.int32(7), "end": np.int32(-2), "step": np.int32(-2)}],
    "reshape": [{"x": _M, "shape": np.array([3, -1], np.int32)}],
    "reverse_sequence": [{"x": _M, "lengths": np.array([1, 3], np.int32), "seq_axis": 1,
                          "batch_axis": 0}],
    "scaled_dot_product_attention": [{"query": _M[None], "key": _M[None], "value": _M[None]}],
    "scaled_tanh": [{"x": FLOATS, "alpha": np.float32(1.5), "beta": np.float32(0.5)}],
    "scatter_along_axis": [{"data": _M, "indices": _I, "updates": -_M, "axis": 1, "mode": m}
                           for m in ("update", "add", "mul", "max")],
    "select": [{"cond": np.array([True, False, True]), "a": FLOATS[:3], "b": FLOATS[-3:]}],
    "sigmoid_hard": [{"x": FLOATS, "alpha": np.float32(0.2), "beta": np.float32(0.5)}],
    "slice_by_index": [{"x": _M, "begin": np.array([0, 2], np.int32),
                        "end": np.array([2, 0], np.int32), "stride": np.array([1, -1], np.int32)}],
    "slice_by_size": [{"x": _M, "begin": np.array([1, 1], np.int32),
                       "size": np.array([1, -1], np.int32)}],
    "slice_update": [{"x": _M, "update": np.zeros((1, 3), np.float32),
                      "begin": np.array([1, 0], np.int32), "end": np.array([2, 3], np.int32)}],
    "softplus_parametric": [{"x": _M[None], "alpha": np.array([0.5, 1.0], np.float32),
                             "beta": np.array([2.0, -1.0], np.float32)}],
    "split": [{"x": _M, "axis": 1, "split_sizes": np.array([1, 2], np.int32)}],
    "stack": [{"values": [_M, -_M], "axis": 1}],
    "threshold": [{"x": FLOATS, "alpha": np.float32(0.5)}],
    "thresholded_relu": [{"x": FLOATS, "alpha": np.float32(0.5)}],
    "tile": [{"x": _M, "reps": np.array([2, 1], np.int32)}],
    "transpose": [{"x": _M, "perm": np.array([1, 0], np.int32)}],
}


#: Where coremltools' fold itself departs from the op definition (found by this
#: comparison; the source is coremltools 9.0's own op definitions).
FOLD_DEVIATIONS: dict[str, str] = {
    "scatter_along_axis": (
        "value_inference ignores `mode`: it always writes the updates (np.put_along_axis), "
        "so a folded add/mul/max/min/sub/div scatter is an update "
        "(coremltools/converters/mil/mil/ops/defs/iOS15/scatter_gather.py)"
    ),
    "thresholded_relu": (
        "value_inference zeroes the input constant in place (`y = self.x.val; y[y < alpha] "
        "= 0`): folding corrupts a constant that other ops also read "
        "(coremltools/converters/mil/mil/ops/defs/iOS15/activation.py)"
    ),
}


@dataclass
class Disagreement:
    """One case where the fold and the simulator's kernel give different values."""

    op_type: str
    case: str
    folded: Any
    computed: Any

    def __str__(self) -> str:
        return f"{self.op_type} {self.case}: folded {self.folded}, computed {self.computed}"


@dataclass
class Report:
    """What a differential run compared and what it found, per op type."""

    compared: dict[str, int]
    disagreements: list[Disagreement]
    unbuilt: dict[str, str]

    def disagreeing_ops(self) -> set[str]:
        return {d.op_type for d in self.disagreements}


def foldable_ops() -> list[str]:
    """Every MIL op type whose coremltools class overrides ``value_inference``."""
    from coremltools.converters.mil.mil.operation import Operation
    from coremltools.converters.mil.mil.ops.registry import SSAOpRegistry

    return sorted(
        op_type
        for op_type, versions in SSAOpRegistry.core_ops.items()
        if any(cls is not None and cls.value_inference is not Operation.value_inference
               for cls in versions.values())
    )


def cases_of(op_type: str) -> Iterator[dict[str, Any]]:
    """The constant inputs ``op_type`` is compared on (none for an op with no grid)."""
    if op_type in CASES:
        yield from CASES[op_type]
        return
    from coremltools.converters.mil.mil.ops.registry import SSAOpRegistry

    cls = next(c for c in SSAOpRegistry.core_ops[op_type].values() if c is not None)
    required = [k for k, t in cls.input_spec.input_types.items() if not t.optional]
    for grid in _grids(op_type):
        if required == ["x"]:
            yield {"x": grid}
        elif required == ["x", "y"]:
            divisor = NONZERO_INTS if grid.dtype.kind == "i" and op_type in _DIVISIONS else grid
            yield {"x": grid[:, None], "y": divisor[None, :]}


def _grids(op_type: str) -> tuple[np.ndarray, ...]:
    if op_type in _LOGICAL:
        return (BOOLS,)
    return (FLOATS, INTS)


def compare(semantics: str = "coreml", ops: list[str] | None = None) -> Report:
    """Fold and compute every case of ``ops`` (default: every foldable op) and compare."""
    variants = get_semantics(semantics).variants
    report = Report({}, [], {})
    for op_type in ops if ops is not None else foldable_ops():
        if op_type in NOT_RUNTIME:
            continue
        reason = ""
        for inputs in cases_of(op_type):
            pristine = _copied(inputs)
            try:
                op = build_op(op_type, **_copied(inputs))
            except Exception as exc:  # the op does not accept this grid (e.g. ints)
                reason = f"{type(exc).__name__}: {exc}"[:200]
                continue
            folded = tuple(None if v is None else np.copy(v) for v in inferred_outputs(op))
            if any(value is None for value in folded):
                reason = "coremltools does not fold these inputs"
                continue
            if _mutated(op, pristine):
                report.disagreements.append(Disagreement(
                    op_type, _label(pristine), "an input constant modified in place",
                    "inputs left as they were"))
                _restore(op, pristine)
            computed = run_kernel(op, np.float32, variants)
            declared = [var_element_dtype(var) for var in op.outputs]
            computed = tuple(_as_declared(v, d) for v, d in zip(computed, declared, strict=True))
            report.compared[op_type] = report.compared.get(op_type, 0) + 1
            elementwise = op_type not in CASES or op_type in _GRID_CASES
            report.disagreements.extend(
                _differences(op_type, pristine, folded, computed, elementwise)
            )
        if op_type not in report.compared:
            report.unbuilt[op_type] = reason
    return report


def _copied(inputs: dict[str, Any]) -> dict[str, Any]:
    """Fresh arrays: a fold that writes into its input must not change the grid."""
    return {k: [np.copy(v) for v in value] if isinstance(value, list) else _fresh(value)
            for k, value in inputs.items()}


def _fresh(value: Any) -> Any:
    return np.copy(value) if isinstance(value, (np.ndarray, np.generic)) else value


def _mutated(op: Any, pristine: dict[str, Any]) -> bool:
    for key, value in pristine.items():
        if not isinstance(value, np.ndarray):
            continue
        held = op.inputs[key].val
        if not np.array_equal(np.asarray(held), value, equal_nan=value.dtype.kind == "f"):
            return True
    return False


def _restore(op: Any, pristine: dict[str, Any]) -> None:
    """Put the original values back so the kernel sees what the program held."""
    for key, value in pristine.items():
        if isinstance(value, np.ndarray):
            np.copyto(op.inputs[key].val, value)


def _as_declared(value: Any, dtype: np.dtype | None) -> Any:
    """A kernel result as the interpreter stores it: cast to the declared output dtype."""
    if dtype is None or dtype.kind == "O":
        return value
    with np.errstate(invalid="ignore"):
        return np.asarray(value).astype(dtype)


def _differences(
    op_type: str, inputs: dict[str, Any], folded: tuple, computed: tuple, elementwise: bool
) -> Iterator[Disagreement]:
    for want, got in zip(folded, computed, strict=True):
        want_a, got_a = np.asarray(want), np.asarray(got)
        if want_a.shape != got_a.shape:
            yield Disagreement(op_type, _label(inputs), f"shape {want_a.shape}",
                               f"shape {got_a.shape}")
            continue
        want_f, got_f = want_a.astype(np.float64), got_a.astype(np.float64)
        close = np.isclose(got_f, want_f, rtol=1e-4, atol=1e-5, equal_nan=True)
        if close.all():
            continue
        bad = np.argwhere(~close)[0]
        where = tuple(int(i) for i in bad)
        label = _label(inputs, where if elementwise else ())
        if not elementwise:
            label += f" at output index {list(where)}"
        yield Disagreement(op_type, label, f"{want_f[where]:g}", f"{got_f[where]:g}")


def _label(inputs: dict[str, Any], where: tuple[int, ...] = ()) -> str:
    """The case's inputs, at the first differing element for an elementwise grid."""
    parts = []
    for key, value in inputs.items():
        array = np.asarray(value) if not isinstance(value, list) else None
        if array is not None and where and array.ndim == len(where):
            index = tuple(min(i, s - 1) for i, s in zip(where, array.shape, strict=True))
            parts.append(f"{key}={array[index]!r}")
        elif array is not None and array.size <= 4:
            parts.append(f"{key}={array.tolist()!r}")
        else:
            parts.append(f"{key}=<{type(value).__name__}>")
    return "(" + ", ".join(parts) + ")"

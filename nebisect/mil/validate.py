"""Check user inputs against a program's main-function signature before simulating.

Core ML refuses inputs of the wrong name, rank, dtype or size with an error; the
simulator must refuse them too (a simulator that silently broadcasts a wrong shape
would report a pass Core ML never gives). Flexible dimensions come from the function's
``input_types`` (``ct.RangeDim`` bounds, ``ct.EnumeratedShapes``), which coremltools'
converters set and :func:`nebisect.mil.load.load_program` restores from the package's
model description; a symbolic dim without declared bounds accepts any size ≥ 1.
Each symbol is bound to the size it takes in the actual inputs, and a symbol shared by
two inputs must take the same size in both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nebisect.errors import NebisectError


class InputError(NebisectError):
    """The inputs do not match what the program declares."""


@dataclass(frozen=True)
class DimSpec:
    """One declared dimension: a static size, or a symbol with inclusive bounds."""

    size: int | None = None
    symbol: str | None = None
    low: int = 1
    high: int = -1  # -1: unbounded, as in ct.RangeDim

    def describe(self) -> str:
        if self.size is not None:
            return str(self.size)
        high = "inf" if self.high < 0 else str(self.high)
        return f"{self.low}..{high}"


@dataclass(frozen=True)
class InputSpec:
    """The declared signature of one main-function input."""

    name: str
    dtype: np.dtype
    dims: tuple[DimSpec, ...]
    enumerated: tuple[tuple[int, ...], ...] = ()

    def describe(self) -> str:
        if self.enumerated:
            shapes = " | ".join(str(list(s)) for s in self.enumerated)
            return f"{self.dtype.name} one of {shapes}"
        return f"{self.dtype.name} [{', '.join(d.describe() for d in self.dims)}]"


def input_specs(function: Any) -> list[InputSpec]:
    """Signatures of a MIL function's inputs, flexible-dim bounds included. A state
    (``ct.StateType``) is no input a caller gives: the simulator holds it."""
    from nebisect.mil.dtypes import numpy_dtype, state_element_dtype

    declared = {t.name: t for t in (getattr(function, "input_types", None) or ())}
    specs = []
    for name, var in function.inputs.items():
        if state_element_dtype(var) is not None:
            continue
        shape = tuple(var.shape) if var.shape is not None else ()
        dims = [_dim_of(s) for s in shape]
        enumerated: tuple[tuple[int, ...], ...] = ()
        shaping = getattr(declared.get(name), "shape", None)
        if shaping is not None and hasattr(shaping, "shapes"):
            enumerated = tuple(
                tuple(int(d) for d in s.shape) for s in shaping.shapes if len(s.shape) == len(dims)
            )
        elif shaping is not None and len(getattr(shaping, "shape", ())) == len(dims):
            for i, declared_dim in enumerate(shaping.shape):
                if dims[i].symbol is not None and hasattr(declared_dim, "lower_bound"):
                    dims[i] = DimSpec(
                        symbol=dims[i].symbol,
                        low=int(declared_dim.lower_bound),
                        high=int(declared_dim.upper_bound),
                    )
        specs.append(InputSpec(name, numpy_dtype(var.dtype), tuple(dims), enumerated))
    return specs


def _dim_of(size: Any) -> DimSpec:
    if isinstance(size, (int, np.integer)):
        return DimSpec(size=int(size))
    return DimSpec(symbol=str(size))


def bind_inputs(specs: list[InputSpec], inputs: dict[str, Any]) -> dict[str, np.ndarray]:
    """Validate ``inputs`` and return them as arrays of their declared kind.

    Every symbolic dimension is bound to its size in the first input that has it and
    must have that size wherever else it appears. Float inputs keep their own float
    dtype (the precision model decides storage); integer inputs are cast to the
    declared integer dtype when their values fit.
    """
    expected = {s.name for s in specs}
    missing = sorted(expected - set(inputs))
    unknown = sorted(set(inputs) - expected)
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing input(s) {', '.join(missing)}")
        if unknown:
            parts.append(f"unknown input(s) {', '.join(unknown)}")
        raise InputError(
            f"{'; '.join(parts)} (the program takes {', '.join(s.name for s in specs)})"
        )
    arrays: dict[str, np.ndarray] = {}
    bindings: dict[str, int] = {}
    for spec in specs:
        value = _coerce(spec, inputs[spec.name])
        _check_shape(spec, value.shape, bindings)
        arrays[spec.name] = value
    return arrays


def _coerce(spec: InputSpec, raw: Any) -> np.ndarray:
    value = np.asarray(raw)
    kind, want = value.dtype.kind, spec.dtype.kind
    if want == "f":
        if kind != "f":
            raise InputError(
                f"input {spec.name!r} must be a float array ({spec.dtype.name}), got {value.dtype}"
            )
        return value
    if want in "iu":
        if kind not in "iu":
            raise InputError(
                f"input {spec.name!r} must be an integer array ({spec.dtype.name}), "
                f"got {value.dtype}"
            )
        info = np.iinfo(spec.dtype)
        if value.size and (value.min() < info.min or value.max() > info.max):
            raise InputError(f"input {spec.name!r} has values outside the {spec.dtype.name} range")
        return value.astype(spec.dtype, copy=False)
    if want == "b" and kind != "b":
        raise InputError(f"input {spec.name!r} must be a bool array, got {value.dtype}")
    return value


def _check_shape(spec: InputSpec, shape: tuple[int, ...], bindings: dict[str, int]) -> None:
    if len(shape) != len(spec.dims):
        raise InputError(
            f"input {spec.name!r} has rank {len(shape)} {list(shape)}, the program expects "
            f"rank {len(spec.dims)}: {spec.describe()}"
        )
    if spec.enumerated and tuple(shape) not in spec.enumerated:
        raise InputError(
            f"input {spec.name!r} has shape {list(shape)}, not one of the enumerated shapes: "
            f"{spec.describe()}"
        )
    for axis, (size, dim) in enumerate(zip(shape, spec.dims, strict=True)):
        if dim.size is not None:
            if size != dim.size:
                raise InputError(
                    f"input {spec.name!r} has size {size} on axis {axis}, the program expects "
                    f"{dim.size}: {spec.describe()}"
                )
            continue
        if size < dim.low or (dim.high >= 0 and size > dim.high):
            raise InputError(
                f"input {spec.name!r} has size {size} on axis {axis}, outside the flexible "
                f"range {dim.describe()}"
            )
        assert dim.symbol is not None
        bound = bindings.setdefault(dim.symbol, size)
        if bound != size:
            raise InputError(
                f"input {spec.name!r} has size {size} on axis {axis}, but dimension "
                f"{dim.symbol} is {bound} in another input"
            )

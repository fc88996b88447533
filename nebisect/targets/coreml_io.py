"""What a Core ML model's description asks of its inputs, read from the package's spec.

* **dtypes.** coremltools' binding turns a numpy array into an ``MLMultiArray`` only
  for int32, float32 and float64 (``PybindCompatibleArray dataTypeOf:`` in
  ``coremlpython/CoreMLPythonArray.mm``, 9.0); an int64 array — torch's default for
  token ids — fails inside ``predict`` with "value type not convertible", which looked
  like a device failure. :func:`cast_inputs` casts integers to int32 and float64 to
  float32 where the description asks for those types, refuses integers that do not fit,
  and returns one note per cast so the verdict says what was done.
* **the default shape.** A compute plan describes the model at its *default* input
  shape; Apple runs a range-shaped model on the Neural Engine only at that shape
  (developer forums thread 724930, an Apple engineer's answer). :func:`shape_scope`
  says when a prediction's inputs differ from the default, so the placement is not
  applied to a shape it does not describe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nebisect.errors import NebisectError

#: ``ArrayFeatureType.ArrayDataType`` names → the numpy dtype Core ML expects.
_ARRAY_DTYPES = {"FLOAT32": np.float32, "DOUBLE": np.float64, "INT32": np.int32,
                 "FLOAT16": np.float16, "INT8": np.int8}


@dataclass(frozen=True)
class CoreMLInput:
    """One multi-array input of a model: dtype, default shape, flexibility kind."""

    name: str
    dtype: Any
    default_shape: tuple[int, ...]
    flexibility: str  # "", "range" or "enumerated"


def describe_inputs(spec: Any) -> dict[str, CoreMLInput]:
    """The multi-array inputs of a model spec (``coremltools.utils.load_spec``)."""
    from coremltools.proto import FeatureTypes_pb2

    names = FeatureTypes_pb2.ArrayFeatureType.ArrayDataType
    described = {}
    for feature in spec.description.input:
        if feature.type.WhichOneof("Type") != "multiArrayType":
            continue
        array = feature.type.multiArrayType
        flexibility = {"shapeRange": "range", "enumeratedShapes": "enumerated"}.get(
            array.WhichOneof("ShapeFlexibility") or "", "")
        described[feature.name] = CoreMLInput(
            feature.name, _ARRAY_DTYPES.get(names.Name(array.dataType)),
            tuple(int(d) for d in array.shape), flexibility)
    return described


def cast_inputs(
    inputs: dict[str, np.ndarray], described: dict[str, CoreMLInput]
) -> tuple[dict[str, np.ndarray], list[str]]:
    """Inputs in the dtypes the model asks for, C-contiguous, and a note per cast.

    Core ML's own conversions (float16 → float32 by coremltools) are left alone; only
    what the binding would refuse (int64, unsigned, bool) or silently reinterpret is cast.
    """
    cast: dict[str, np.ndarray] = {}
    notes: list[str] = []
    for name, value in inputs.items():
        array = np.asarray(value)
        given = array.dtype
        wanted = described[name].dtype if name in described else None
        if wanted is not None and array.dtype != wanted and _castable(array.dtype, wanted):
            array = _checked_cast(name, array, np.dtype(wanted))
            notes.append(f"input {name}: cast {given} → {np.dtype(wanted)} "
                         "as the model's description asks")
        cast[name] = np.ascontiguousarray(array)
    return cast, notes


def _castable(have: np.dtype[Any], wanted: Any) -> bool:
    integer = have.kind in "iub"
    return (integer and np.dtype(wanted).kind == "i") or (
        have == np.float64 and wanted == np.float32)


def _checked_cast(name: str, array: np.ndarray, wanted: np.dtype[Any]) -> np.ndarray:
    if wanted.kind == "i" and array.size:
        info = np.iinfo(wanted)
        low, high = int(array.min()), int(array.max())
        if low < info.min or high > info.max:
            raise NebisectError(f"input {name}: values {low}..{high} do not fit the "
                                f"{wanted} the model asks for")
    return array.astype(wanted)


def shape_scope(inputs: dict[str, np.ndarray], described: dict[str, CoreMLInput]) -> str:
    """'' when the compute plan describes these inputs, else why it does not."""
    differing = [d for n, d in described.items()
                 if d.flexibility and n in inputs and tuple(inputs[n].shape) != d.default_shape]
    if not differing:
        return ""
    shown = ", ".join(f"{d.name} {_dims(d.default_shape)} (given "
                      f"{_dims(tuple(inputs[d.name].shape))})" for d in differing)
    advice = (" Core ML runs a range-shaped model on the Neural Engine only at its default "
              "shape; convert with ct.EnumeratedShapes to get each listed shape planned"
              if any(d.flexibility == "range" for d in differing) else "")
    return f"the compute plan describes the default shape: {shown}.{advice}"


def _dims(shape: tuple[int, ...]) -> str:
    return "×".join(map(str, shape))

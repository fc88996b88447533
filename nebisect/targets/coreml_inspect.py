"""Intermediate values of a Core ML run: the program, re-saved with extra outputs.

Bisection by first divergence needs every intermediate value of the *device's* run, and
Core ML only returns a model's outputs. coremltools 9.0's ``MLModelInspector``
(``coremltools.models.ml_program.experimental.debugging_utils``) gets them by cloning
the spec, appending op outputs to the main block's outputs and the model description,
and predicting the clone. nebisect does the same here, as three pieces of plain data
work so the device layer (:mod:`nebisect.targets.coreml`) stays one compile and one
predict:

* :func:`inspectable_outputs` — which values to request: the tensor outputs of the main
  block's ops, in program order, except constants (Core ML folds them; the inspector
  skips them too) and values whose element type a model output cannot have (the
  inspector's own table: fp16, fp32, fp64, int32);
* :func:`save_with_outputs` — the package with those outputs added, sharing the
  original's weight files;
* :func:`unfaithful` — whether the clone still computes what the original computed:
  an extra output forces Core ML to materialize a value it may have fused away, which
  can move an op to another device and change the numbers. When the clone's own outputs
  are not bit-identical to the original's, its intermediates describe another run and
  are dropped (the bisection then falls back to ddmin) with the reason.

Nothing here runs Core ML: these functions take the protobuf spec and arrays, so they
are tested on any platform.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

#: Ops whose value Core ML knows at load time (``MLModelInspector``'s ``const_ops``).
CONST_OPS = frozenset({
    "const", "constexpr_blockwise_shift_scale", "constexpr_lut_to_dense",
    "constexpr_sparse_to_dense", "constexpr_lut_to_sparse", "constexpr_affine_dequantize",
    "constexpr_cast",
})
#: MIL element types a model output may have → ``ArrayFeatureType`` names (the inspector's
#: ``_data_type_to_feature_type``).
_OUTPUT_TYPES = {"FLOAT16": "FLOAT16", "FLOAT32": "FLOAT32", "FLOAT64": "DOUBLE",
                 "INT32": "INT32"}
#: ``MLModelInspector`` raises the specification version to iOS16 (fp16 outputs need it).
_IOS16_SPEC = 7


def _main_block(spec: Any) -> Any:
    function = spec.mlProgram.functions["main"]
    return function.block_specializations[function.opset]


def inspectable_outputs(spec: Any) -> list[str]:
    """The op output names of ``spec``'s main block a clone can return, in program order."""
    from coremltools.proto import MIL_pb2

    block = _main_block(spec)
    declared = set(block.outputs)
    names = []
    for op in block.operations:
        if op.type.split(".", 1)[-1] in CONST_OPS:
            continue
        for value in op.outputs:
            kind = value.type.WhichOneof("type")
            element = MIL_pb2.DataType.Name(value.type.tensorType.dataType)
            if kind == "tensorType" and element in _OUTPUT_TYPES and value.name not in declared:
                names.append(value.name)
    return names


def spec_with_outputs(spec: Any, names: list[str]) -> Any:
    """A copy of ``spec`` whose main block also returns ``names`` (as the inspector does)."""
    from coremltools.proto import FeatureTypes_pb2, MIL_pb2, Model_pb2

    clone = Model_pb2.Model()
    clone.CopyFrom(spec)
    clone.specificationVersion = max(_IOS16_SPEC, clone.specificationVersion)
    block = _main_block(clone)
    types = {value.name: value.type for op in block.operations for value in op.outputs}
    array_types = FeatureTypes_pb2.ArrayFeatureType.ArrayDataType
    for name in names:
        element = MIL_pb2.DataType.Name(types[name].tensorType.dataType)
        block.outputs.append(name)
        feature = clone.description.output.add()
        feature.name = name
        feature.type.multiArrayType.dataType = array_types.Value(_OUTPUT_TYPES[element])
    return clone


def save_with_outputs(package: Path, destination: Path) -> list[str]:
    """Save ``package`` with every inspectable value as an extra output at
    ``destination``; returns the names added."""
    from coremltools.models.utils import save_spec

    from nebisect.mil.load import read_spec

    spec = read_spec(package)
    names = inspectable_outputs(spec)
    weights = package / "Data" / "com.apple.CoreML" / "weights"
    save_spec(spec_with_outputs(spec, names), str(destination),
              weights_dir=str(weights) if weights.is_dir() else None)
    return names


def unfaithful(original: dict[str, np.ndarray], clone: dict[str, np.ndarray]) -> str:
    """'' when the clone's outputs equal the original's bit for bit (NaN equal to NaN),
    else why its intermediates cannot stand for the original run."""
    differing = [name for name, value in original.items()
                 if name not in clone or not np.array_equal(
                     np.asarray(value), np.asarray(clone[name]), equal_nan=True)]
    if not differing:
        return ""
    return (f"intermediates not used: with extra outputs the program computes other "
            f"values for {', '.join(sorted(differing))} (Core ML placed or fused it "
            "differently), so first divergence cannot trust them")


def split_outputs(outputs: dict[str, Any], names: list[str], original: list[str]
                  ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(the original outputs, every value: intermediates and outputs, as the simulator
    records them) of one prediction of the clone."""
    arrays = {name: np.asarray(value) for name, value in outputs.items()}
    return ({n: arrays[n] for n in original if n in arrays},
            {n: arrays[n] for n in [*names, *original] if n in arrays})


def trusted_intermediates(cloned: dict[str, Any], names: list[str],
                          outputs: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], str]:
    """(every value of the clone's prediction ``cloned``, '') when the clone computed the
    original ``outputs`` again, else ({}, why its values are not used)."""
    own, values = split_outputs(cloned, names, list(outputs))
    why = unfaithful(outputs, own)
    return ({}, why) if why else (values, "")

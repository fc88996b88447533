"""A compressed program's weights, and running it with some of them restored.

coremltools' ``coremltools.optimize.coreml`` compresses a weight by replacing its
``const`` with ``constexpr_*`` ops (a LUT and indices, quantized data with a scale, a
sparse mask…) that the device decompresses at load time; the op that consumed the
weight keeps its name. A *compressed weight* is the last of such a chain: the value a
compute op reads. Restoring it means running the program with that value taken from
the uncompressed (baseline) program's same op input instead — what asks "would this
output pass if this op's weights were not compressed?" without re-saving a package.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from nebisect.codec import Record

if TYPE_CHECKING:
    from nebisect.mil.interp import CompiledProgram

#: what each constexpr op does to a weight, in a user's words
COMPRESSION_WORDS = {
    "constexpr_lut_to_dense": "palettized",
    "constexpr_affine_dequantize": "linear-quantized",
    "constexpr_blockwise_shift_scale": "linear-quantized",
    "constexpr_sparse_to_dense": "pruned",
    "constexpr_lut_to_sparse": "palettized",
    "constexpr_sparse_blockwise_shift_scale": "linear-quantized",
    "constexpr_cast": "cast",
}


@dataclass(frozen=True)
class CompressedWeight(Record):
    """One compressed weight: the value ``var`` that the compute op ``op`` (of type
    ``op_type``) reads as its input ``input``, and how it was compressed (``how``:
    ``2-bit palettized``, ``int8 linear-quantized``, ``pruned``…) and its ``shape``."""

    var: str
    op: str
    op_type: str
    input: str
    how: str
    shape: tuple[int, ...] = ()

    def describe(self) -> str:
        """``linear "linear_0" (weight, 2-bit palettized)``."""
        return f'{self.op_type} "{self.op}" ({self.input}, {self.how})'


def compressed_weights(function: Any) -> list[CompressedWeight]:
    """The compressed weights of a MIL function, in program order: each value a
    ``constexpr_*`` op produces and a compute op reads."""
    producers = {op.outputs[0].name: op for op in function.operations
                 if op.op_type.startswith("constexpr_")}
    found: dict[str, CompressedWeight] = {}
    for op in function.operations:
        if op.op_type.startswith("constexpr_") or op.op_type == "const":
            continue
        for key, value in op.inputs.items():
            name = str(getattr(value, "name", ""))
            if name in producers and name not in found:
                found[name] = CompressedWeight(
                    name, op.name, op.op_type, key, _how(producers[name], producers),
                    tuple(int(d) for d in value.shape))
    return list(found.values())


def _how(op: Any, producers: dict[str, Any]) -> str:
    """The compression of a chain of constexpr ops ending at ``op``, outermost last."""
    words = []
    while op is not None:
        words.append(_words(op))
        op = next((producers[v.name] for v in op.inputs.values()
                   if getattr(v, "name", None) in producers), None)
    return " + ".join(reversed(words))


def _words(op: Any) -> str:
    """One constexpr op's compression; with its bits where the op's inputs show them."""
    words = COMPRESSION_WORDS.get(op.op_type, op.op_type.removeprefix("constexpr_"))
    if "lut" in op.inputs:
        lut = np.asarray(op.inputs["lut"].val)
        entries = lut.shape[-1] if lut.ndim == 1 else lut.shape[-2]
        return f"{int(math.log2(entries))}-bit {words}"
    data = op.inputs.get("quantized_data", op.inputs.get("data"))
    if data is not None and hasattr(data, "dtype"):
        from coremltools.converters.mil.mil import types

        return f"{types.builtin_to_string(data.dtype)} {words}"
    return words


def baseline_values(compiled: CompiledProgram, produced: dict[str, Any],
                    function: Any, weights: list[CompressedWeight]) -> dict[str, Any]:
    """Each weight's uncompressed value: what the baseline ``function``'s op of the same
    name reads as the same input (a constant of its ``compiled`` plan, or a value in
    ``produced``, the baseline's intermediates). A weight the baseline has no such op
    input for, or one of another shape, is left out: it cannot be restored."""
    ops = {op.name: op for op in function.operations}
    values = {}
    for weight in weights:
        op = ops.get(weight.op)
        var = op.inputs.get(weight.input) if op is not None else None
        name = getattr(var, "name", None)
        value = compiled.plan.constants.get(name, produced.get(name)) if name else None
        if value is not None and np.shape(value) == weight.shape:
            values[weight.var] = value
    return values


def restored(compiled: CompiledProgram, values: dict[str, Any]) -> CompiledProgram:
    """``compiled`` with the values ``values`` names fixed (the steps that produce them
    dropped, each value held as the dropped step would have stored it); the same plan
    when ``values`` is empty."""
    from nebisect.mil.interp import CompiledProgram
    from nebisect.mil.plan import BlockPlan

    plan = compiled.plan
    kept, constants = [], dict(plan.constants)
    for step in plan.main.steps:
        name, storage, _ = step.outputs[0] if step.outputs else ("", None, None)
        if name not in values:
            kept.append(step)
            continue
        value = np.asarray(values[name])
        constants[name] = storage.hold(value.astype(storage.logical)) if storage else value
    main = BlockPlan(plan.main.inputs, kept, plan.main.outputs)
    return CompiledProgram(replace(plan, main=main, constants=constants), compiled.specs)

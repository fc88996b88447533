"""The dependency view of a MIL program: which ops read which values.

Constants (``const`` / ``constexpr_*`` ops) are not units of the view: they travel with
the ops that read them. Culprit search reads this view to name the op where a failure
enters; the reducer (:mod:`nebisect.minimize.graphs.mil`) cuts programs along it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nebisect.errors import NebisectError
from nebisect.search.divergence import Dag


class ExtractionError(NebisectError):
    """A subset of ops cannot be turned into a program (nested blocks, unknown value)."""


def is_constant(op: Any) -> bool:
    """Ops whose values are fixed at compile/load time travel with their consumers."""
    return op.op_type == "const" or op.op_type.startswith("constexpr_")


def flat_vars(argument: Any) -> list[Any]:
    """The vars of one op argument (a list for variadic parameters such as concat's)."""
    return list(argument) if isinstance(argument, (list, tuple)) else [argument]


class ProgramGraph:
    """The dependency view of one function of a MIL program (``main`` by default)."""

    def __init__(self, program: Any, function: str = "main") -> None:
        if function not in program.functions:
            raise ExtractionError(f"program has no function {function!r}")
        self.program = program
        self.function = program.functions[function]
        self.ops: dict[str, Any] = {}
        self.vars: dict[str, Any] = dict(self.function.inputs)
        for op in self.function.operations:
            self.ops[op.name] = op
            self.vars.update((v.name, v) for v in op.outputs)
        units = [op for op in self.function.operations if not is_constant(op)]
        self.dag = Dag(
            order=[op.name for op in units],
            consumes={op.name: self._dynamic_inputs(op) for op in units},
            produces={op.name: [v.name for v in op.outputs] for op in units},
            inputs=list(self.function.inputs),
            outputs=[v.name for v in self.function.outputs],
        )
        self.op_types = {op.name: op.op_type for op in self.function.operations}
        #: Symbolic dims an input binds (a dynamic sequence); any other symbol is data
        #: dependent, and a cut input of that size gets the recorded, concrete size.
        self.bound = {str(d) for var in self.function.inputs.values()
                      for d in (var.shape or ()) if not isinstance(d, int)}

    @property
    def units(self) -> tuple[str, ...]:
        return self.dag.order

    def _dynamic_inputs(self, op: Any) -> list[str]:
        if op.blocks:
            raise ExtractionError(
                f"op {op.name!r} ({op.op_type}) has nested blocks; control flow cannot be cut"
            )
        names: dict[str, None] = {}
        for argument in op.inputs.values():
            for var in flat_vars(argument):
                if var.op is None or not is_constant(var.op):
                    names.setdefault(var.name)
        return list(names)


def nonfinite_constants(graph: ProgramGraph) -> dict[str, tuple[str, ...]]:
    """Per op, the constants it reads that hold inf or NaN (``'var_37' = -inf``): an fp16
    program stores a float32 constant past ±65504 (``finfo(float32).min`` in a mask) as
    ``-inf``, and the op that reads it is where the program's own NaN begins."""
    found = {}
    for name in graph.units:
        op = graph.ops[name]
        read = [f"{var.name!r} = {_extreme(var.val)}" for argument in op.inputs.values()
                for var in flat_vars(argument)
                if var.op is not None and is_constant(var.op) and _nonfinite(var.val)]
        if read:
            found[name] = tuple(read)
    return found


def _nonfinite(value: Any) -> bool:
    array = np.asarray(value) if value is not None else np.zeros(0)
    return array.dtype.kind == "f" and not bool(np.isfinite(array).all())


def _extreme(value: Any) -> str:
    """The non-finite values a constant holds, as the report names them."""
    array = np.asarray(value)
    kinds = [word for word, hit in (("-inf", np.isneginf(array).any()),
                                    ("inf", np.isposinf(array).any()),
                                    ("NaN", np.isnan(array).any())) if hit]
    return "/".join(kinds) + ("" if array.size == 1 else f" (in {array.size} values)")

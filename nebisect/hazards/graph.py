"""A read-only view of a coremltools MIL program for lint rules.

Rules ask the same questions over and over — which ops exist (nested blocks
included), who produced this value once dtype-only casts are looked through, will
this value be computed in fp16, what constant does this input hold, how many elements
does this reduction sum — so the answers live here once, and the rule modules stay
guard-clause pattern matchers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from nebisect.mil.patterns import max_shift, reduced_axes
from nebisect.mil.quiet import import_coremltools

#: Ops that change only the dtype or nothing at all: a pattern looks through them.
TRANSPARENT_OPS = frozenset({"cast", "identity"})


@dataclass(frozen=True)
class Range:
    """A declared input range ``NAME=LO:HI`` (``--input-range``)."""

    lo: float
    hi: float


class ProgramView:
    """The program plus the lint options that decide what counts as a hazard.

    ``assume_fp16`` (``--fp16``): fp32 values count as fp16 too — the Neural
    Engine computes in fp16 whatever the program declares, so an fp32 program that is
    meant to run there has the same range hazards.
    """

    def __init__(
        self,
        program: Any,
        *,
        assume_fp16: bool = False,
        input_ranges: dict[str, Range] | None = None,
    ) -> None:
        import_coremltools()
        from coremltools.converters.mil.mil import types

        self._types = types
        self.program = program
        self.assume_fp16 = assume_fp16
        self.input_ranges = dict(input_ranges or {})
        self._function_of: dict[int, str] = {}
        self._ops: list[Any] = []
        self._position: dict[tuple[str, str], int] = {}
        for name, function in program.functions.items():
            self._collect(name, function)

    def _collect(self, function_name: str, block: Any) -> None:
        for op in block.operations:
            for inner in op.blocks:
                self._collect(function_name, inner)
            self._function_of[id(op)] = function_name
            self._position.setdefault((function_name, op.name), len(self._ops))
            self._ops.append(op)

    # -- structure ---------------------------------------------------------------------

    def ops(self, *op_types: str) -> Iterator[Any]:
        """Every non-const op (nested blocks included), optionally of the given types."""
        for op in self._ops:
            if op.op_type == "const":
                continue
            if not op_types or op.op_type in op_types:
                yield op

    def consts(self) -> Iterator[Any]:
        """Every ``const`` op (nested blocks included)."""
        return (op for op in self._ops if op.op_type == "const")

    def position(self, function: str, op_name: str) -> int:
        """Topological index of an op (findings are listed in program order)."""
        return self._position.get((function, op_name), len(self._ops))

    def function_of(self, op: Any) -> str:
        return self._function_of.get(id(op), "main")

    def functions(self) -> Iterator[tuple[str, Any]]:
        yield from self.program.functions.items()

    def source(self, var: Any) -> Any:
        """``var`` with dtype-only ops (cast, identity) looked through, upstream."""
        while var.op is not None and var.op.op_type in TRANSPARENT_OPS:
            var = var.op.inputs["x"]
        return var

    def producer(self, var: Any, *op_types: str) -> Any | None:
        """The op that produced ``var`` (through casts) if it is one of ``op_types``."""
        op = self.source(var).op
        if op is None or (op_types and op.op_type not in op_types):
            return None
        return op

    def max_shift(self, var: Any) -> Any | None:
        """The ``reduce_max`` op ``m`` when ``var`` is ``a − m`` with ``m = reduce_max(a)``
        (:func:`nebisect.mil.patterns.max_shift`, the matcher the fixes use too).

        Such a value is ≤ 0 by construction, so ``exp`` of it cannot overflow: this is
        the cure every exp-of-a-reduction rule looks for.
        """
        return max_shift(var)

    def consumers(self, var: Any) -> Iterator[Any]:
        """Ops reading ``var``, looking downstream through dtype-only ops."""
        for child in var.child_ops:
            if child.op_type in TRANSPARENT_OPS:
                yield from self.consumers(child.outputs[0])
            else:
                yield child

    # -- values and types ----------------------------------------------------------------

    def const_value(self, var: Any) -> np.ndarray | None:
        """The constant value of ``var`` (through casts), or None when it is computed."""
        if var is None:
            return None
        var = self.source(var)
        if var.op is None or var.op.op_type != "const" or var.val is None:
            return None
        return np.asarray(var.val)

    def is_float(self, var: Any) -> bool:
        return self._types.is_float(var.dtype)

    def is_fp16(self, var: Any) -> bool:
        """True when ``var`` will be computed and stored in fp16 under these options."""
        if var.dtype == self._types.fp16:
            return True
        return self.assume_fp16 and var.dtype == self._types.fp32

    def reduced_size(self, op: Any) -> int | None:
        """Elements combined per output of a ``reduce_*`` op; None if a dim is symbolic."""
        shape = op.inputs["x"].shape
        axes = self.reduce_axes(op)
        size = 1
        for axis in axes:
            dim = shape[axis]
            if not isinstance(dim, (int, np.integer)):
                return None
            size *= int(dim)
        return size

    def reduce_axes(self, op: Any) -> list[int]:
        """The normalized (non-negative) axes of a ``reduce_*`` op (all axes if none)."""
        return reduced_axes(op)

    def function_outputs(self) -> list[tuple[str, Any]]:
        return [(name, v) for name, f in self.functions() for v in f.outputs]

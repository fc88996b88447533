"""Data-dependent shapes: dimensions no input dimension determines.

Seed 003: a masked mean-pool over a flexible sequence converts to
``tile(mask, reps=<computed from shapes at run time>)``; MIL cannot infer the tile's
output shape, gives it fresh symbols, and the pooled output is typed ``[?, H]`` even
though the reduction removes the flexible axis. On non-CPU compute units Core ML
rejects it ("Invalid blob shape: Data-dependent shapes were disabled") or, inside a
full encoder, crashes with SIGSEGV. A symbol bound to an input dimension (a
``RangeDim``) — or to a broadcast of such dimensions — is fine; a symbol bound to
nothing is the hazard. The rule reports the op that *introduces* such a symbol (its
inputs have none), naming the outputs it reaches.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from nebisect.hazards.graph import ProgramView
from nebisect.hazards.records import LintFinding
from nebisect.hazards.registry import finding, lint_rule
from nebisect.mil.quiet import import_coremltools

#: Elementwise ops whose fresh output symbols are the broadcast of their inputs' dims
#: (two flexible inputs get distinct symbols once a package is loaded): a function of
#: input dimensions, not of data.
_BROADCASTING = frozenset({
    "add", "sub", "mul", "real_div", "floor_div", "mod", "pow", "maximum", "minimum",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
    "logical_or", "logical_xor", "select",
})


def _symbols(shape: Iterable[Any]) -> set[Any]:
    import_coremltools()
    from coremltools.converters.mil.mil.types.symbolic import is_symbolic

    found: set[Any] = set()
    for dim in shape:
        if is_symbolic(dim):
            found |= set(getattr(dim, "free_symbols", {dim}))
    return found


def _tensor_inputs(op: Any) -> Iterator[Any]:
    for value in op.inputs.values():
        yield from value if isinstance(value, (list, tuple)) else (value,)


def _shape_text(shape: Iterable[Any], unbound: set[Any]) -> str:
    dims = ["?" if _symbols([d]) & unbound else str(d) for d in shape]
    return "[" + ", ".join(dims) + "]"


@lint_rule(
    "data-dependent-shape",
    severity="error",
    title="shape with a symbol bound to no input dimension",
    rationale=(
        "Core ML disables data-dependent shapes on non-CPU compute units: such a "
        "model fails with 'Invalid blob shape' or crashes (SIGSEGV) outside CPU_ONLY."
    ),
    source="seed 003 (masked mean-pool over a RangeDim sequence, coremltools 9.0)",
    fix="meanpool-static-shape",
)
def data_dependent_shapes(view: ProgramView) -> Iterator[LintFinding]:
    bound: set[Any] = set()
    for _, function in view.functions():
        for var in function.inputs.values():
            bound |= _symbols(getattr(var, "shape", ()) or ())
    outputs = {id(var): var for _, var in view.function_outputs()}
    for op in view.ops():
        introduced = set().union(*(_symbols(v.shape or ()) for v in op.outputs)) - bound
        if not introduced:
            continue
        inherited = set().union(*(
            _symbols(v.shape or ()) for v in _tensor_inputs(op) if hasattr(v, "shape")
        ))
        if inherited - bound:
            continue
        if op.op_type in _BROADCASTING:
            bound |= introduced
            continue
        reached = [
            var for var in _downstream(op) if id(var) in outputs
            and _symbols(var.shape or ()) - bound
        ]
        first = op.outputs[0]
        if reached:
            shown = ", ".join(
                f"'{v.name}' {_shape_text(v.shape, _symbols(v.shape) - bound)}" for v in reached
            )
            message = (
                f"{op.op_type} '{op.name}' gives '{first.name}' the data-dependent shape "
                f"{_shape_text(first.shape, introduced)}; it reaches the output {shown}: "
                "Core ML rejects data-dependent shapes on non-CPU compute units"
            )
        else:
            message = (
                f"{op.op_type} '{op.name}' gives '{first.name}' the data-dependent shape "
                f"{_shape_text(first.shape, introduced)} (no input dimension binds it)"
            )
        yield finding(
            view, "data-dependent-shape", op, message,
            severity="error" if reached else "warning",
            outputs=[v.name for v in reached],
            symbols=sorted(str(s) for s in introduced),
        )


def _downstream(op: Any) -> list[Any]:
    """Every value computed from ``op``'s outputs (``op``'s own included)."""
    seen: dict[int, Any] = {}
    stack = list(op.outputs)
    while stack:
        var = stack.pop()
        if id(var) in seen:
            continue
        seen[id(var)] = var
        for child in var.child_ops:
            stack.extend(child.outputs)
    return list(seen.values())

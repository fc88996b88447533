"""MIL programs as reducible graphs: ops are units; a subset of ops becomes a new program.

A subset is materialized in two steps so that the in-memory program and the standalone
``repro.py`` can never disagree: :meth:`MilGraph.plan` describes the subgraph as plain
data (:class:`SubgraphPlan` — inputs, constants, op calls, outputs, named exactly as in the
original program), and :func:`build` replays that plan through coremltools' MIL builder
(``nebisect.minimize.repro.script`` prints the same plan as builder source code).

Rules of the cut:

* ``const`` / ``constexpr_*`` ops are not units: they are re-emitted, as constants, with
  the kept ops that read them ("that op plus its constants").
* A value a kept op reads from a dropped op becomes a function input fed with its
  recorded value from the reference run — unless coremltools already knows it at
  compile time (``var.val``, e.g. a ``shape`` of a static tensor), in which case it
  stays a constant, because ops such as ``reshape`` need such parameters to be const.
* Function inputs keep the declared dtype and shape: a symbolic dim bound by an input
  of the original program (a dynamic sequence) stays symbolic, so a dynamic-shape bug
  stays dynamic; a data-dependent one (a symbol no input binds) takes the recorded
  size — feeding a value must not turn "known only by running the graph" into "given
  by the caller", which would hide (or fake) data-dependent-shape failures.
* A dtype Core ML cannot take as an input (``bool``, small ints, fp16 before iOS16) or
  a rank-0 value is fed through a typed input plus ``cast``/``squeeze`` adapter ops
  that produce the original name.
* Outputs are the kept ops' values that no kept op reads, plus kept graph outputs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from nebisect.arrays import sha256_arrays, sha256_bytes
from nebisect.mil.dtypes import numpy_dtype
from nebisect.mil.graph import ExtractionError, ProgramGraph, flat_vars, is_constant
from nebisect.mil.quiet import import_coremltools
from nebisect.search.divergence import Cut

#: Core ML function inputs may be these element types (fp16 only from iOS16 on).
_INPUT_DTYPES = ("fp32", "int32", "fp16")
_IOS16 = 7  # coremltools' AvailableTarget.iOS16 value


@dataclass
class PlanInput:
    """A function input. ``name`` is what the caller feeds; the adapter ops (``cast`` to
    ``dtype``, ``squeeze`` of a rank-0 value) produce the original value ``var``."""

    name: str
    var: str
    shape: tuple[int | str, ...]
    dtype: str
    cast_to: str | None = None
    squeeze: bool = False


@dataclass
class PlanOp:
    """One op call. ``args`` map parameter names to value names (a list for variadic
    parameters such as concat's ``values``); a constant has ``op_type`` ``const`` and
    its ``value``; ``outputs`` are the original value names in order."""

    op_type: str
    name: str
    args: dict[str, str | list[str]]
    outputs: list[str]
    value: Any = None


@dataclass
class SubgraphPlan:
    """A self-contained subgraph as data: enough to build it or to print it as code."""

    opset: Any
    inputs: list[PlanInput]
    ops: list[PlanOp]
    outputs: list[str]
    feeds: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def op_types(self) -> list[str]:
        return [op.op_type for op in self.ops]

    def digest(self) -> str:
        """Content hash of the candidate this plan materializes: its structure, every
        constant's bytes and the feeds — equal plans build equal programs."""
        structure = {
            "opset": _opset_value(self.opset),
            "inputs": [asdict(entry) for entry in self.inputs],
            "ops": [[op.op_type, op.name, op.args, op.outputs, _value_digest(op.value)]
                    for op in self.ops],
            "outputs": self.outputs,
            "feeds": sha256_arrays(self.feeds),
        }
        return sha256_bytes(json.dumps(structure, sort_keys=True, default=str).encode())


class MilGraph(ProgramGraph):
    """A program's dependency view that can cut a subset of its ops out as a program."""

    def plan(self, units: Iterable[str], recorded: Mapping[str, np.ndarray]) -> SubgraphPlan:
        """The subgraph of ``units`` (op names) as a :class:`SubgraphPlan`, fed from ``recorded``
        (value name → array from a reference run: function inputs and intermediates)."""
        cut = self.dag.cut(set(units))
        if not cut.units:
            raise ExtractionError("cannot extract an empty set of ops")
        opset = self.function.opset_version
        inputs: list[PlanInput] = []
        ops: list[PlanOp] = []
        feeds: dict[str, np.ndarray] = {}
        for name in cut.inputs:
            var = self.vars[name]
            if var.val is not None and name not in self.function.inputs:
                ops.append(PlanOp("const", f"{name}__const", {}, [name], var.val))
                continue
            if name not in recorded:
                raise ExtractionError(f"no recorded value for {name!r}, an input of the cut")
            entry = self._plan_input(var, opset, np.shape(recorded[name]))
            inputs.append(entry)
            feeds[entry.name] = _feed(recorded[name], entry)
        ops.extend(self._emit(cut))
        return SubgraphPlan(opset, inputs, ops, list(cut.outputs), feeds)

    def _plan_input(self, var: Any, opset: Any, recorded: tuple[int, ...]) -> PlanInput:
        import_coremltools()
        from coremltools.converters.mil.mil import types

        if not types.is_tensor(var.sym_type) and not types.is_scalar(var.sym_type):
            raise ExtractionError(f"{var.name!r} is not a tensor; it cannot become an input")
        dtype = types.builtin_to_string(var.dtype)
        if len(recorded) != len(var.shape):
            raise ExtractionError(f"recorded value of {var.name!r} has shape {list(recorded)}, "
                                  f"the program declares rank {len(var.shape)}")
        shape = tuple(
            d if isinstance(d, int) else (str(d) if str(d) in self.bound else int(n))
            for d, n in zip(var.shape, recorded, strict=True)
        )
        allowed = _INPUT_DTYPES if _opset_value(opset) >= _IOS16 else _INPUT_DTYPES[:2]
        fed = dtype if dtype in allowed else ("fp32" if dtype.startswith(("fp", "bf")) else "int32")
        adapted = fed != dtype or not shape
        return PlanInput(
            name=f"{var.name}__input" if adapted else var.name,
            var=var.name,
            shape=shape or (1,),
            dtype=fed,
            cast_to=dtype if fed != dtype else None,
            squeeze=not shape,
        )

    def _emit(self, cut: Cut) -> list[PlanOp]:
        kept = set(cut.units)
        needed: set[str] = set()
        for name in cut.units:
            self._collect_constants(self.ops[name], needed)
        return [
            _plan_op(op)
            for op in self.function.operations
            if op.name in kept or op.name in needed
        ]

    def _collect_constants(self, op: Any, needed: set[str]) -> None:
        for argument in op.inputs.values():
            for var in flat_vars(argument):
                if var.op is not None and is_constant(var.op) and var.op.name not in needed:
                    needed.add(var.op.name)
                    self._collect_constants(var.op, needed)


def _value_digest(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, np.ndarray | np.generic):
        return sha256_arrays({"value": np.asarray(value)})
    return f"{type(value).__name__}:{value!r}"


def _opset_value(opset: Any) -> int:
    return int(getattr(opset, "value", opset or 0))


def _plan_op(op: Any) -> PlanOp:
    outputs = [v.name for v in op.outputs]
    if op.op_type == "const":
        return PlanOp("const", op.name, {}, outputs, op.outputs[0].val)
    args: dict[str, str | list[str]] = {
        param: [v.name for v in argument] if isinstance(argument, (list, tuple)) else argument.name
        for param, argument in op.inputs.items()
    }
    return PlanOp(op.op_type, op.name, args, outputs)


def _feed(value: np.ndarray, entry: PlanInput) -> np.ndarray:
    from coremltools.converters.mil.mil import types

    array = np.asarray(value).astype(numpy_dtype(types.string_to_builtin(entry.dtype)))
    return array.reshape(1) if entry.squeeze else array


def build(plan: SubgraphPlan) -> Any:
    """Replay a :class:`SubgraphPlan` through the MIL builder into a fresh ``Program``."""
    import_coremltools()
    from coremltools.converters.mil import Builder as mb
    from coremltools.converters.mil.mil import Function, Program, get_new_symbol, types

    symbols: dict[str, Any] = {}
    specs = {
        entry.name: mb.placeholder(
            shape=[d if isinstance(d, int) else symbols.setdefault(d, get_new_symbol())
                   for d in entry.shape],
            dtype=types.string_to_builtin(entry.dtype),
        )
        for entry in plan.inputs
    }
    with Function(specs, plan.opset) as function:
        values: dict[str, Any] = {}
        for entry in plan.inputs:
            var = function.inputs[entry.name]
            if entry.cast_to:
                name = f"{entry.var}__cast" if entry.squeeze else entry.var
                var = mb.cast(x=var, dtype=entry.cast_to, name=name)
            if entry.squeeze:
                var = mb.squeeze(x=var, name=entry.var)
            values[entry.var] = var
        for step in plan.ops:
            _build_op(mb, step, values)
        missing = [name for name in plan.outputs if name not in values]
        if missing:
            raise ExtractionError(f"plan outputs never produced: {missing}")
        function.set_outputs([values[name] for name in plan.outputs])
    program = Program()
    program.add_function("main", function)
    return program


def _build_op(mb: Any, step: PlanOp, values: dict[str, Any]) -> None:
    if step.op_type == "const":
        results: Any = mb.const(val=step.value, name=step.name)
    else:
        kwargs = {
            param: [values[n] for n in arg] if isinstance(arg, list) else values[arg]
            for param, arg in step.args.items()
        }
        try:
            results = getattr(mb, step.op_type)(**kwargs, name=step.name)
        except Exception as exc:
            raise ExtractionError(
                f"cannot rebuild {step.name!r} ({step.op_type}): {exc}"
            ) from exc
    produced = list(results) if isinstance(results, (list, tuple)) else [results]
    for var, name in zip(produced, step.outputs, strict=True):
        var.set_name(name)
        values[name] = var


def extract(
    graph: MilGraph, units: Sequence[str], recorded: Mapping[str, np.ndarray]
) -> tuple[Any, dict[str, np.ndarray]]:
    """The subgraph of ``units`` as a new ``Program`` plus the inputs to feed it."""
    plan = graph.plan(units, recorded)
    return build(plan), plan.feeds

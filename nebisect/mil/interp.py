"""The MIL interpreter: run a program's main function op by op under a precision model.

``run_program(program, inputs, precision, profile=..., semantics=..., intermediates=...)``
validates
the inputs against the program (:mod:`nebisect.mil.validate`), compiles the function
into a plan once (:mod:`nebisect.mil.plan`, cached per program object and checked
against the program's current op list, so an edited program is recompiled), then walks
the plan: control flow (``cond``, ``while_loop``) runs its blocks, every other op calls
its kernel.

Kernel calling convention (``nebisect/mil/kernels``): ``fn(ctx, **inputs)`` where
``inputs`` has one keyword per input the op type declares (internal ``_``-prefixed
inputs excluded), ``None`` when the op omits an optional one, a list for tuple inputs
(``concat``'s ``values``). Float arrays arrive in ``ctx.dtype``; integer and bool
arrays and non-tensor constants (strings, ints) arrive as the program holds them.
Float *results* may be returned in any float dtype: the interpreter rounds them to the
storage dtype the precision model gives the declared output type — so a ``cast`` to
fp16 under the fp64 model stays exact, and under fp16 rounds. Integer results are cast
to the declared integer dtype.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nebisect.errors import NebisectError
from nebisect.mil.kernels import MissingKernelError
from nebisect.mil.kernels.state import StateCell
from nebisect.mil.plan import (
    BlockPlan,
    ExecutionPlan,
    PlanDiff,
    Step,
    compile_function,
    same_value,
)
from nebisect.mil.profiles import get_profile
from nebisect.mil.semantics import DEFAULT_SEMANTICS, get_semantics
from nebisect.mil.validate import bind_inputs, input_specs

__all__ = ["ComputedValues", "SimError", "SimPredictError", "SimRefusal", "SimResult",
           "compile_program", "run_program"]

MAX_LOOP_ITERATIONS = 1_000_000


class SimPredictError(RuntimeError):
    """A failure the simulated device reports at predict time (same wording as the device)."""


class SimRefusal(RuntimeError):
    """A program the simulated runtime refuses to load (a published runtime rule)."""


class SimError(NebisectError):
    """A kernel failed on the values it was given (an invalid program or a kernel bug)."""


@dataclass
class SimResult:
    outputs: dict[str, np.ndarray]
    intermediates: dict[str, np.ndarray] = field(default_factory=dict)
    placement: dict[str, str] = field(default_factory=dict)
    op_types: dict[str, str] = field(default_factory=dict)
    #: op key → why the device profile placed it on the CPU
    fallbacks: dict[str, str] = field(default_factory=dict)
    #: each state input as the prediction left it (the next one starts from it)
    state: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass
class CompiledProgram:
    """A program's plan plus its input signature, reusable across many runs."""

    plan: ExecutionPlan
    specs: list[Any]

    def refuse(self, stages: tuple[str, ...] = ("load", "plan")) -> None:
        """Raise the program's refusal if its rule's stage is among ``stages``: a load or
        plan refusal as :class:`SimRefusal` (Core ML builds the plan when it loads the
        model), a predict-time one as :class:`SimPredictError`."""
        refusal = self.plan.refusal
        if refusal is None or refusal.rule.stage not in stages:
            return
        if refusal.rule.stage == "predict":
            raise SimPredictError(refusal.text)
        raise SimRefusal(refusal.text)

    def run(self, inputs: dict[str, Any], *, intermediates: bool = False,
            state: dict[str, np.ndarray] | None = None) -> SimResult:
        """One prediction. A stateful program starts from ``state`` (what the previous
        prediction's :attr:`SimResult.state` holds), else from zeroed states."""
        return self.evaluate(inputs, state=state).result(intermediates)

    def evaluate(self, inputs: dict[str, Any], *,
                 state: dict[str, np.ndarray] | None = None) -> ComputedValues:
        """One prediction, every value it computed kept (:meth:`run_beside` reuses them)."""
        arrays = self._admitted(inputs)
        plan = self.plan
        env: dict[str, Any] = dict(plan.constants)
        carried = state or {}
        cells = {name: slot.cell(carried.get(name)) for name, slot in plan.states.items()}
        env.update(cells)
        with np.errstate(all="ignore"):
            for name, value in arrays.items():
                storage = plan.input_storage.get(name)
                env[name] = storage.hold(value) if storage is not None else value
            _run_block(plan.main, env)
        return ComputedValues(plan, env, cells)

    def run_beside(self, base: ComputedValues, diff: PlanDiff, inputs: dict[str, Any], *,
                   intermediates: bool = False) -> SimResult:
        """:meth:`run` on the inputs ``base`` evaluated under another plan of the same
        function, running only what this plan computes differently: the steps ``diff``
        (:func:`~nebisect.mil.plan.diff_plans` of base's plan and this one) names, and
        those reading a value whose bits came out different — the rest is base's, bit
        for bit what running it here would give. ``diff`` must be shareable."""
        arrays = self._admitted(inputs)
        plan = self.plan
        env = dict(base.env)
        changed: set[str] = set()
        with np.errstate(all="ignore"):
            for name in diff.entries:
                if name in plan.constants:
                    env[name] = plan.constants[name]
                elif name in arrays:
                    storage = plan.input_storage.get(name)
                    env[name] = storage.hold(arrays[name]) if storage is not None else arrays[name]
                if not same_value(env.get(name), base.env.get(name)):
                    changed.add(name)
            for index, step in enumerate(plan.main.steps):
                if not diff.reruns(index, step, changed):
                    continue
                _run_step(step, env)
                changed.update(name for name, _, _ in step.outputs
                               if not same_value(env[name], base.env.get(name)))
        return ComputedValues(plan, env, {}).result(intermediates)

    def _admitted(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """The inputs bound to the program's signature, once the device and the runtime
        have nothing to refuse."""
        arrays = bind_inputs(self.specs, inputs)
        if self.plan.device_error is not None:
            raise SimPredictError(self.plan.device_error)
        self.refuse(stages=("load", "plan", "predict"))
        return arrays


@dataclass
class ComputedValues:
    """One prediction's every value (``env``: constants, inputs, each op's outputs) and
    its state cells, under ``plan``."""

    plan: ExecutionPlan
    env: dict[str, Any]
    cells: dict[str, StateCell]

    def result(self, intermediates: bool) -> SimResult:
        """The prediction: outputs (and every intermediate, when asked) as the precision
        model stores them, with the plan's placement."""
        plan, env = self.plan, self.env
        with np.errstate(all="ignore"):
            outputs = {name: _logical(plan, name, env) for name in plan.output_names}
            inter = (
                {name: _logical(plan, name, env) for name in plan.produced if name in env}
                if intermediates
                else {}
            )
        held = {name: plan.states[name].logical(cell) for name, cell in self.cells.items()}
        return SimResult(outputs, inter, dict(plan.placement), dict(plan.op_types),
                         dict(plan.fallbacks), held)


def _logical(plan: ExecutionPlan, name: str, env: dict[str, Any]) -> Any:
    """A value as the precision model stores it (fp16 emulated in float32 → float16)."""
    value = env[name]
    logical = plan.emulated.get(name)
    if logical is not None:
        return np.asarray(value).astype(logical)
    return np.asarray(value) if name in plan.output_names else value


_Entry = tuple[tuple[Any, ...], CompiledProgram]
_Key = tuple[str, str | None, str, str | None, int | None]
_CACHE: weakref.WeakKeyDictionary[Any, dict[_Key, _Entry]] = weakref.WeakKeyDictionary()


def compile_program(
    program: Any,
    precision: str = "fp64",
    *,
    profile: str | None = None,
    semantics: str = DEFAULT_SEMANTICS,
    unit: str | None = None,
    memory_budget: int | None = None,
) -> CompiledProgram:
    """Compile ``program``'s main function (cached while the program is unchanged).

    ``unit`` names the compute unit for the runtime's refusals (:func:`compile_function`);
    a refusal is raised by :meth:`CompiledProgram.run`, or by the caller at load time.
    ``memory_budget``: the bytes one declared tensor may take, refused before its kernel
    allocates it (:mod:`nebisect.mil.sizes`); None leaves shapes unchecked."""
    function = _main_function(program)
    fingerprint = _fingerprint(function)
    key = (precision, profile, semantics, unit, memory_budget)
    per_program = _CACHE.setdefault(program, {})
    cached = per_program.get(key)
    if cached is not None and cached[0] == fingerprint:
        return cached[1]
    device = get_profile(profile) if profile is not None else None
    plan = compile_function(function, precision, device, get_semantics(semantics), unit,
                            memory_budget)
    compiled = CompiledProgram(plan, input_specs(function))
    per_program[key] = (fingerprint, compiled)
    return compiled


def run_program(
    program: Any,
    inputs: dict[str, np.ndarray],
    precision: str = "fp64",
    *,
    profile: str | None = None,
    semantics: str = DEFAULT_SEMANTICS,
    unit: str | None = None,
    intermediates: bool = False,
    memory_budget: int | None = None,
) -> SimResult:
    """Execute ``program`` on ``inputs``; see the module docstring for the semantics.

    With a ``profile`` the profile's own precision model applies to the ops it places on
    its accelerator (fp32 semantics to CPU fallback ops) and ``precision`` is not used.
    ``semantics`` is ``coreml`` (the Core ML runtime's published behaviour, the default)
    or ``spec`` (the op definitions; :mod:`nebisect.mil.semantics`). With a ``unit``
    (``cpu``, ``gpu``, ``ne``) the runtime's refusals for it apply, raised before any op
    runs (:class:`SimRefusal`, or :class:`SimPredictError` for a predict-time rule).
    ``memory_budget``: as :func:`compile_program` takes it.
    """
    return compile_program(program, precision, profile=profile, semantics=semantics,
                           unit=unit, memory_budget=memory_budget,
                           ).run(inputs, intermediates=intermediates)


def _main_function(program: Any) -> Any:
    functions = getattr(program, "functions", None)
    if not functions:
        raise NebisectError("not a MIL program: it has no functions")
    name = getattr(program, "default_function_name", "main")
    if name not in functions:
        name = "main" if "main" in functions else next(iter(functions))
    return functions[name]


def _fingerprint(function: Any) -> tuple[Any, ...]:
    """What a plan depends on: declared input types, and every op with its inputs.

    Ops and vars are held by reference (they compare by identity), so an edited program
    — an op added or removed, an input rewired, outputs changed — never matches.
    """
    declared = tuple(
        (t, getattr(t, "shape", None)) for t in getattr(function, "input_types", None) or ()
    )
    return declared, _block_parts(function)


def _block_parts(block: Any) -> tuple[Any, ...]:
    parts: list[Any] = []
    for op in block.operations:
        parts.append(op)
        for value in op.inputs.values():
            parts.append(tuple(value) if isinstance(value, (list, tuple)) else value)
        for sub in op.blocks:
            parts.append(_block_parts(sub))
    parts.append(tuple(block.outputs))
    return tuple(parts)


def _run_block(block: BlockPlan, env: dict[str, Any]) -> None:
    for step in block.steps:
        _run_step(step, env)


def _run_step(step: Step, env: dict[str, Any]) -> None:
    if step.fn is not None:
        _run_kernel(step, env)
    elif step.op_type == "cond":
        _run_cond(step, env)
    else:
        _run_while(step, env)


def _run_kernel(step: Step, env: dict[str, Any]) -> None:
    kwargs = dict(step.static)
    for key, name, convert in step.dynamic:
        value = env[name]
        kwargs[key] = value if convert is None else value.astype(convert)
    for key, members in step.tuples:
        kwargs[key] = [
            env[name] if convert is None else env[name].astype(convert) for name, convert in members
        ]
    try:
        result = step.fn(step.ctx, **kwargs)  # type: ignore[misc]
    except (MissingKernelError, SimPredictError, MemoryError):
        raise  # a MemoryError is the case's ``oom``, not a kernel's failure
    except Exception as exc:  # a kernel error names the op, never a bare numpy traceback
        raise SimError(f"op {step.name!r} ({step.op_type}) failed: {exc}") from exc
    if len(step.outputs) == 1:
        _store(step, step.outputs[0], result, env)
    else:
        for out, value in zip(step.outputs, result, strict=True):
            _store(step, out, value, env)


def _store(step: Step, out: tuple[str, Any, Any], value: Any, env: dict[str, Any]) -> None:
    name, storage, shape = out
    if storage is not None and storage.container.kind != "O":
        value = storage.hold(value)
        if shape is not None and not _shape_matches(value.shape, shape):
            declared = [("?" if d is None else d) for d in shape]
            raise SimError(
                f"op {step.name!r} ({step.op_type}) produced shape {list(value.shape)} for "
                f"{name!r}, the program declares {declared}"
            )
    env[name] = value


def _shape_matches(actual: tuple[int, ...], declared: tuple[int | None, ...]) -> bool:
    if len(actual) != len(declared):
        return False
    return all(d is None or a == d for a, d in zip(actual, declared, strict=True))


def _run_cond(step: Step, env: dict[str, Any]) -> None:
    pred = env[step.dynamic[0][1]] if step.dynamic else step.static["pred"]
    branch = step.blocks[0] if bool(np.asarray(pred)) else step.blocks[1]
    _run_block(branch, env)
    for out, source in zip(step.outputs, branch.outputs, strict=True):
        _store(step, out, env[source], env)


def _run_while(step: Step, env: dict[str, Any]) -> None:
    cond_block, body = step.blocks
    values = _loop_inputs(step, env)
    for _ in range(MAX_LOOP_ITERATIONS):
        env.update(zip(cond_block.inputs, values, strict=True))
        _run_block(cond_block, env)
        if not bool(np.asarray(env[cond_block.outputs[0]])):
            break
        env.update(zip(body.inputs, values, strict=True))
        _run_block(body, env)
        values = [env[name] for name in body.outputs]
    else:
        raise SimError(f"while_loop {step.name!r} ran {MAX_LOOP_ITERATIONS} iterations")
    for out, value in zip(step.outputs, values, strict=True):
        _store(step, (out[0], out[1], None), value, env)


def _loop_inputs(step: Step, env: dict[str, Any]) -> list[Any]:
    if step.tuples:
        return [env[name] for name, _ in step.tuples[0][1]]
    return list(step.static["loop_vars"])

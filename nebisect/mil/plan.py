"""Compile a MIL function once into an execution plan the interpreter walks cheaply.

Everything that does not depend on the input values is decided here, once per
(program, precision, profile): which kernel each op runs, in which dtype it computes,
where its results are stored, which inputs need a dtype conversion, the constant
arguments already converted, the shapes the program declares (to catch kernel bugs),
and — for a device profile — where each op is placed and whether an output's shape is
data dependent. The per-op work left at run time is a dict lookup per input, the kernel
call and a dtype check per output.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nebisect.mil.dtypes import var_element_dtype
from nebisect.mil.kernels import Kernel, KernelContext, get_kernel
from nebisect.mil.precision import PrecisionModel, get_precision
from nebisect.mil.profiles import Profile

CONTROL_FLOW = ("cond", "while_loop")


@dataclass(frozen=True)
class Mode:
    """How one op computes: compute dtype, storage dtype (None = as declared), variants."""

    compute: type[np.floating]
    storage: type[np.floating] | None
    variants: tuple[str, ...]
    device: str | None = None

    def store(self, declared: np.dtype | None) -> np.dtype | None:
        """Storage dtype of a value the program declares as ``declared``."""
        if declared is None or declared.kind != "f":
            return declared
        return np.dtype(self.storage) if self.storage is not None else declared


@dataclass(slots=True)
class Step:
    """One op ready to run; ``blocks`` holds the sub-plans of control-flow ops."""

    name: str
    op_type: str
    fn: Kernel | None
    ctx: KernelContext
    static: dict[str, Any]
    dynamic: tuple[tuple[str, str, np.dtype | None], ...]
    tuples: tuple[tuple[str, tuple[tuple[str, np.dtype | None], ...]], ...]
    outputs: tuple[tuple[str, np.dtype | None, tuple[int | None, ...] | None], ...]
    blocks: tuple[BlockPlan, ...] = ()
    device: str | None = None


@dataclass(slots=True)
class BlockPlan:
    inputs: tuple[str, ...]
    steps: list[Step]
    outputs: tuple[str, ...]


@dataclass
class Plan:
    """A compiled main function: constants, entry conversions, the block plan."""

    main: BlockPlan
    constants: dict[str, Any]
    input_storage: dict[str, np.dtype | None]
    output_names: tuple[str, ...]
    produced: list[str] = field(default_factory=list)
    placement: dict[str, str] = field(default_factory=dict)
    op_types: dict[str, str] = field(default_factory=dict)
    device_error: str | None = None


class _Compiler:
    def __init__(self, model: PrecisionModel, profile: Profile | None) -> None:
        self.profile = profile
        self.cpu = Mode(np.float32, None, ())
        if profile is None:
            self.value_mode = Mode(model.compute, model.storage, model.variants)
        else:
            self.value_mode = Mode(model.compute, None, ())
            self.device_mode = Mode(
                model.compute, model.storage, (*model.variants, profile.variant), profile.device
            )
        self.constants: dict[str, Any] = {}
        self.storage: dict[str, np.dtype | None] = {}
        self.converted: dict[tuple[str, Any], Any] = {}
        self.plan_produced: list[str] = []
        self.placement: dict[str, str] = {}
        self.op_types: dict[str, str] = {}

    def mode_of(self, op: Any) -> Mode:
        if self.profile is None:
            return self.value_mode
        return self.device_mode if self.profile.place(op) == self.profile.device else self.cpu

    def const(self, op: Any) -> None:
        var = op.outputs[0]
        declared = var_element_dtype(var)
        value = var.val
        want = self.value_mode.store(declared)
        if want is not None and want.kind == "f":
            value = np.asarray(value, dtype=declared).astype(want)
        self.constants[var.name] = value
        self.storage[var.name] = want

    def const_arg(self, name: str, compute: type[np.floating]) -> Any:
        """A constant as a kernel argument: floats in the compute dtype, the rest as is."""
        value = self.constants[name]
        stored = self.storage[name]
        if stored is None or stored.kind != "f" or stored == compute:
            return value
        key = (name, compute)
        if key not in self.converted:
            self.converted[key] = np.asarray(value).astype(compute)
        return self.converted[key]

    def arg_conversion(self, name: str, compute: type[np.floating]) -> np.dtype | None:
        stored = self.storage.get(name)
        if stored is not None and stored.kind == "f" and stored != compute:
            return np.dtype(compute)
        return None

    def block(self, block: Any, inputs: tuple[Any, ...], in_loop: bool) -> BlockPlan:
        for var in inputs:
            self.storage[var.name] = self.value_mode.store(var_element_dtype(var))
        steps = []
        for op in block.operations:
            if op.op_type == "const":
                self.const(op)
            else:
                steps.append(self.step(op, in_loop))
        return BlockPlan(
            tuple(v.name for v in inputs), steps, tuple(v.name for v in block.outputs)
        )

    def step(self, op: Any, in_loop: bool) -> Step:
        mode = self.mode_of(op)
        compute = mode.compute
        static: dict[str, Any] = {}
        dynamic = []
        tuples = []
        present = op.inputs
        for key in op.input_spec.input_types:
            if key.startswith("_"):
                continue
            value = present.get(key)
            if value is None:
                static[key] = None
            elif isinstance(value, (list, tuple)):
                if all(v.name in self.constants for v in value):
                    static[key] = [self.const_arg(v.name, compute) for v in value]
                else:
                    tuples.append(
                        (key, tuple((v.name, self.arg_conversion(v.name, compute)) for v in value))
                    )
            elif value.name in self.constants:
                static[key] = self.const_arg(value.name, compute)
            else:
                dynamic.append((key, value.name, self.arg_conversion(value.name, compute)))
        outputs = []
        for var in op.outputs:
            declared = var_element_dtype(var)
            stored = mode.store(declared)
            self.storage[var.name] = stored
            self.plan_produced.append(var.name)
            outputs.append((var.name, stored, None if in_loop else _declared_shape(var)))
        blocks: tuple[BlockPlan, ...] = ()
        fn = None
        if op.op_type == "cond":
            blocks = tuple(self.block(b, (), in_loop) for b in op.blocks)
        elif op.op_type == "while_loop":
            blocks = tuple(self.block(b, tuple(b.inputs), True) for b in op.blocks)
        else:
            fn = get_kernel(op.op_type, mode.variants)
        variant = mode.variants[-1] if mode.variants else ""
        ctx = KernelContext(dtype=compute, op=op, variant=variant)
        key = op_key(op)
        self.op_types[key] = op.op_type
        if self.profile is not None:
            self.placement[key] = mode.device or "cpu"
        return Step(
            op.name, op.op_type, fn, ctx, static, tuple(dynamic), tuple(tuples),
            tuple(outputs), blocks, self.placement.get(key),
        )


def op_key(op: Any) -> str:
    """How placement and op types name an op: by its first output, as Core ML's compute
    plan does (the device target can only name ops that way), else by the op's name."""
    return op.outputs[0].name if op.outputs else op.name


def _declared_shape(var: Any) -> tuple[int | None, ...] | None:
    """Declared shape with None for symbolic dims; None when the var is not a tensor."""
    shape = getattr(var, "shape", None)
    if shape is None or var_element_dtype(var) is None:
        return None
    return tuple(int(s) if isinstance(s, (int, np.integer)) else None for s in shape)


def compile_function(
    function: Any, precision: str, profile: Profile | None
) -> Plan:
    """Build the execution plan of ``function`` under a precision model and profile."""
    model = get_precision(profile.precision if profile is not None else precision)
    compiler = _Compiler(model, profile)
    inputs = tuple(function.inputs.values())
    main = compiler.block(function, inputs, False)
    plan = Plan(
        main=main,
        constants=compiler.constants,
        input_storage={v.name: compiler.storage[v.name] for v in inputs},
        output_names=tuple(v.name for v in function.outputs),
        produced=compiler.plan_produced,
        placement=compiler.placement,
        op_types=compiler.op_types,
    )
    if profile is not None:
        plan.device_error = profile.shape_error(function, plan.placement)
    return plan

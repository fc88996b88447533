"""Compile a MIL function once into an execution plan the interpreter walks cheaply.

Everything that does not depend on the input values is decided here, once per
(program, precision, profile, semantics): which kernel each op runs, in which dtype it computes,
where its results are stored, which inputs need a dtype conversion, the constant
arguments already converted, the shapes the program declares (to catch kernel bugs, and
to refuse a tensor over the memory limit before its kernel allocates it:
:mod:`nebisect.mil.sizes`),
and — for a device profile — where each op is placed and whether an output's shape is
data dependent. The per-op work left at run time is a dict lookup per input, the kernel
call and a dtype check per output.

Values that the precision model stores as fp16 while computing in fp32 (``fp16``, the
Neural Engine profile) are held in float32 arrays rounded to fp16 values
(:func:`nebisect.mil.precision.round_to_fp16`): bit-identical to fp16 storage, without
numpy's slow half-precision casts before and after every kernel. They are returned as
float16 arrays. A movement op (:data:`MOVEMENT_OPS`) over values on the fp16 grid
produces values on it, and so does an op that picks among its inputs' values
(:data:`PICKING_OPS`, a maximum or a relu): their outputs are stored without a rounding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nebisect.mil.dtypes import state_element_dtype, var_element_dtype
from nebisect.mil.kernels import Kernel, KernelContext, get_kernel
from nebisect.mil.kernels.state import StateCell
from nebisect.mil.precision import PrecisionModel, get_precision, round_to_fp16
from nebisect.mil.profiles import Profile, bound_symbols
from nebisect.mil.semantics import Semantics
from nebisect.mil.semantics.rules import Refusal, first_refusal
from nebisect.mil.sizes import check_shape


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


#: Ops whose float outputs are values of their float inputs, moved and none computed:
#: from inputs on the fp16 grid they produce values on it, which need no rounding.
MOVEMENT_OPS = frozenset({
    "reshape", "transpose", "squeeze", "expand_dims", "slice_by_index", "slice_by_size",
    "concat", "split", "stack", "tile", "gather", "gather_along_axis", "gather_nd",
    "reverse", "identity",
})

#: Ops whose float outputs are picked among the values of the named inputs (or are 0, or
#: relu6's 6): from those inputs on the fp16 grid they produce values on it.
PICKING_OPS: dict[str, tuple[str, ...]] = {
    "relu": ("x",), "relu6": ("x",), "maximum": ("x", "y"), "minimum": ("x", "y"),
    "clip": ("x", "alpha", "beta"), "threshold": ("x", "alpha"), "select": ("a", "b"),
    "reduce_max": ("x",), "reduce_min": ("x",), "max_pool": ("x",), "band_part": ("x",),
}


@dataclass(frozen=True, slots=True)
class Storage:
    """How a value is held: the ``logical`` dtype the model stores, the ``container``
    numpy dtype holding it, and whether the container needs rounding to ``logical``
    (``rounds``) or arrives on the fp16 grid already (``on_grid``: a movement or picking
    op's output, laid out contiguous as a rounding lays it out, the same values with
    less work)."""

    logical: np.dtype
    container: np.dtype
    rounds: bool = False
    on_grid: bool = False

    @property
    def emulated(self) -> bool:
        """True when fp16 values are held in a float32 container."""
        return self.rounds or self.on_grid

    def hold(self, value: Any) -> Any:
        """``value`` as this storage holds it (cast, and rounded to fp16 if emulated)."""
        if not isinstance(value, np.ndarray):
            value = np.asarray(value)
        source = value.dtype
        if self.on_grid and source == self.container:
            return np.asarray(value, order="C")  # rank 0 stays rank 0
        if self.emulated and source == np.float64:
            return value.astype(np.float16).astype(np.float32)  # one rounding, not two
        if source != self.container:
            value = value.astype(self.container)
        if self.emulated and source != self.logical:
            value = round_to_fp16(value)
        return value


Shape = tuple[int | None, ...] | None


@dataclass(frozen=True)
class StateSlot:
    """A state input of the function: its declared ``shape`` and the ``storage`` the
    precision model holds it in (the state's declared dtype under the value mode)."""

    shape: tuple[int, ...]
    storage: Storage

    def cell(self, value: Any = None) -> StateCell:
        """The state at the start of a prediction: ``value`` (what the previous one left),
        else zeros — Core ML's ``make_state()``."""
        initial = np.zeros(self.shape, self.storage.container) if value is None else value
        return StateCell(self.storage.hold(initial), self.storage.hold)

    def logical(self, cell: StateCell) -> np.ndarray:
        """The value a cell holds, in the dtype the model stores (fp16 as float16)."""
        return cell.value.astype(self.storage.logical)


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
    outputs: tuple[tuple[str, Storage | None, Shape], ...]
    blocks: tuple[BlockPlan, ...] = ()


@dataclass(slots=True)
class BlockPlan:
    inputs: tuple[str, ...]
    steps: list[Step]
    outputs: tuple[str, ...]


@dataclass
class ExecutionPlan:
    """A compiled main function: constants, entry conversions, the block plan."""

    main: BlockPlan
    constants: dict[str, Any]
    input_storage: dict[str, Storage | None]
    output_names: tuple[str, ...]
    emulated: dict[str, np.dtype] = field(default_factory=dict)
    produced: list[str] = field(default_factory=list)
    placement: dict[str, str] = field(default_factory=dict)
    #: op key → why the profile placed it off its accelerator (``integer dtype``, …)
    fallbacks: dict[str, str] = field(default_factory=dict)
    op_types: dict[str, str] = field(default_factory=dict)
    device_error: str | None = None
    #: the first published runtime rule the program breaks on the units it runs on
    refusal: Refusal | None = None
    #: the state inputs (``ct.StateType``), carried from one prediction to the next
    states: dict[str, StateSlot] = field(default_factory=dict)


class _Compiler:
    """Walks a function once, deciding each op's mode, kernel, arguments and storage."""

    def __init__(
        self, model: PrecisionModel, profile: Profile | None, semantics: Semantics,
        bound: frozenset[str] = frozenset(), memory_budget: int | None = None,
    ) -> None:
        self.profile = profile
        #: bytes a declared tensor may take (:mod:`nebisect.mil.sizes`); None: unchecked
        self.memory_budget = memory_budget
        #: the symbols the function's input shapes bind (a profile's placement reads them)
        self.bound = bound
        runtime = semantics.variants  # looked up after the precision and profile variants
        self.cpu = Mode(np.float32, None, runtime)
        if profile is None:
            self.value_mode = Mode(model.compute, model.storage, (*model.variants, *runtime))
        else:
            self.value_mode = Mode(model.compute, None, runtime)
            self.device_mode = Mode(
                model.compute, model.storage, (*model.variants, profile.variant, *runtime),
                profile.device,
            )
        self.emulate_half = model.compute is np.float32
        self.constants: dict[str, Any] = {}
        self.storage: dict[str, Storage | None] = {}
        self.emulated: dict[str, np.dtype] = {}
        self.converted: dict[tuple[str, Any], Any] = {}
        self.plan_produced: list[str] = []
        self.placement: dict[str, str] = {}
        self.fallbacks: dict[str, str] = {}
        self.op_types: dict[str, str] = {}

    def mode_of(self, op: Any) -> Mode:
        if self.profile is None:
            return self.value_mode
        return self.cpu if self.profile.fallback(op, self.bound) else self.device_mode

    def storage_of(self, name: str, mode: Mode, declared: np.dtype | None,
                   on_grid: bool = False) -> Storage | None:
        """Record and return how the value ``name`` is held under ``mode``; ``on_grid``:
        the op producing it keeps values already on the fp16 grid."""
        storage = self.held_as(mode, declared)
        if storage is not None and storage.rounds and on_grid:
            storage = Storage(storage.logical, storage.container, on_grid=True)
        if storage is not None and storage.emulated:
            self.emulated[name] = storage.logical
        self.storage[name] = storage
        return storage

    def held_as(self, mode: Mode, declared: np.dtype | None) -> Storage | None:
        """How ``mode`` holds a value declared ``declared`` (fp16 emulated in float32
        when the model computes in float32)."""
        logical = mode.store(declared)
        if logical is None:
            return None
        emulated = self.emulate_half and logical == np.float16
        return Storage(logical, np.dtype(np.float32) if emulated else logical, emulated)

    def state_slot(self, var: Any) -> StateSlot | None:
        """The slot of a state input (None: ``var`` is no state). Its storage is not
        recorded as the var's: ops receive the state's cell, never a converted array."""
        declared = state_element_dtype(var)
        storage = self.held_as(self.value_mode, declared)
        if storage is None:
            return None
        return StateSlot(tuple(int(d) for d in var.shape), storage)

    def const(self, op: Any) -> None:
        var = op.outputs[0]
        declared = var_element_dtype(var)
        storage = self.storage_of(var.name, self.value_mode, declared)
        value = var.val
        if storage is not None and storage.logical.kind == "f":
            value = storage.hold(np.asarray(value, dtype=declared))
        self.constants[var.name] = value

    def const_arg(self, name: str, compute: type[np.floating]) -> Any:
        """A constant as a kernel argument: floats in the compute dtype, the rest as is."""
        value = self.constants[name]
        if self.arg_conversion(name, compute) is None:
            return value
        key = (name, compute)
        if key not in self.converted:
            self.converted[key] = np.asarray(value).astype(compute)
        return self.converted[key]

    def arg_conversion(self, name: str, compute: type[np.floating]) -> np.dtype | None:
        storage = self.storage.get(name)
        if storage is not None and storage.container.kind == "f" and storage.container != compute:
            return np.dtype(compute)
        return None

    def block(self, block: Any, inputs: tuple[Any, ...], in_loop: bool) -> BlockPlan:
        for var in inputs:
            self.check_size(var, f"input {var.name!r}")
            self.storage_of(var.name, self.value_mode, var_element_dtype(var))
        steps = []
        for op in block.operations:
            if op.op_type == "const":
                self.const(op)
            else:
                steps.append(self.step(op, in_loop))
        return BlockPlan(
            tuple(v.name for v in inputs), steps, tuple(v.name for v in block.outputs)
        )

    def keeps_grid_values(self, op: Any) -> bool:
        """True when ``op``'s float outputs are on the fp16 grid because its inputs are: a
        movement op whose float inputs are all held on the grid (emulated), or a picking
        op whose value inputs are all floats held on it."""
        if op.op_type in PICKING_OPS:
            picked = [op.inputs.get(name) for name in PICKING_OPS[op.op_type]]
            held = [self.storage.get(var.name) for var in picked if var is not None]
            return all(storage is not None and storage.emulated for storage in held)
        if op.op_type not in MOVEMENT_OPS:
            return False
        for value in op.inputs.values():
            for var in value if isinstance(value, (list, tuple)) else (value,):
                storage = self.storage.get(var.name)
                if storage is not None and storage.logical.kind == "f" and not storage.emulated:
                    return False
        return True

    def check_size(self, var: Any, label: str) -> None:
        """Refuse ``var`` when its declared shape is over the memory budget."""
        if self.memory_budget is not None:
            check_shape(_declared_shape(var), label, self.memory_budget)

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
        on_grid = self.keeps_grid_values(op)
        for var in op.outputs:
            self.check_size(var, f"{var.name!r} ({op.op_type})")
            storage = self.storage_of(var.name, mode, var_element_dtype(var), on_grid)
            self.plan_produced.append(var.name)
            outputs.append((var.name, storage, None if in_loop else _declared_shape(var)))
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
            if mode.device is None:
                self.fallbacks[key] = self.profile.fallback(op, self.bound)
        return Step(
            op.name, op.op_type, fn, ctx, static, tuple(dynamic), tuple(tuples),
            tuple(outputs), blocks,
        )


def op_key(op: Any) -> str:
    """How placement and op types name an op: by its first output, as Core ML's compute
    plan does (the device target can only name ops that way), else by the op's name."""
    return op.outputs[0].name if op.outputs else op.name


def _declared_shape(var: Any) -> tuple[int | None, ...] | None:
    """Declared shape with None for symbolic dims; None when the var is not a tensor."""
    if var_element_dtype(var) is None:
        return None
    shape = var.shape
    if any(str(s).startswith("*") for s in shape):  # variadic symbol: rank unknown
        return None
    return tuple(int(s) if isinstance(s, (int, np.integer)) else None for s in shape)


def compile_function(
    function: Any, precision: str, profile: Profile | None, semantics: Semantics,
    unit: str | None = None, memory_budget: int | None = None,
) -> ExecutionPlan:
    """Build the execution plan of ``function`` under a precision model, a profile and
    an op semantics (the definition, or the Core ML runtime's).

    ``unit`` is the compute unit every op runs on (``cpu``, ``gpu``, ``ne``) for the
    runtime's refusals; a profile places each op itself. Without either, or under a
    semantics without refusals, no rule applies (the float64 oracle). ``memory_budget``:
    the bytes one declared tensor may take (:mod:`nebisect.mil.sizes`), None unchecked."""
    model = get_precision(profile.precision if profile is not None else precision)
    compiler = _Compiler(model, profile, semantics, bound_symbols(function), memory_budget)
    inputs = tuple(function.inputs.values())
    main = compiler.block(function, inputs, False)
    plan = ExecutionPlan(
        main=main,
        constants=compiler.constants,
        input_storage={v.name: compiler.storage[v.name] for v in inputs},
        output_names=tuple(v.name for v in function.outputs),
        emulated=compiler.emulated,
        produced=compiler.plan_produced,
        placement=compiler.placement,
        fallbacks=compiler.fallbacks,
        op_types=compiler.op_types,
        states={v.name: slot for v in inputs if (slot := compiler.state_slot(v)) is not None},
    )
    if profile is not None:
        plan.device_error = profile.shape_error(function, plan.placement)
    if semantics.refusals and (unit is not None or profile is not None):
        placement = plan.placement
        plan.refusal = first_refusal(
            function, lambda op: placement.get(op_key(op)) if profile is not None else unit)
    return plan


@dataclass(frozen=True)
class PlanDiff:
    """Where two plans of one function compute differently, op by op: what running the
    ``other`` plan must redo when the ``base`` plan has run on the same inputs.

    ``entries`` are the inputs and constants the plans hold differently (an fp32 input
    the fp16 model rounds at entry, a constant stored as declared beside one stored in
    fp16); ``differing`` names each main-block step whose kernel, compute dtype,
    constant arguments, argument conversions, output storage or nested blocks differ,
    with why; ``reads`` holds every main-block step's inputs, those of its nested blocks
    included. ``shareable`` is False when a plan carries state from one prediction to the
    next (a state cell is written in place: each plan needs its own) or the plans'
    steps do not pair up (not one function): then nothing is shared."""

    entries: frozenset[str]
    differing: dict[str, str]
    reads: tuple[frozenset[str], ...]
    shareable: bool = True

    def reruns(self, index: int, step: Step, changed: set[str]) -> bool:
        """Must the ``index``-th main step, ``step``, run again, given the values whose
        content ``changed`` from the base's?"""
        return step.name in self.differing or not self.reads[index].isdisjoint(changed)

    def downstream(self, plan: ExecutionPlan) -> list[str]:
        """The steps of ``plan`` (the other) re-run when every re-run step's outputs
        differ from the base's: the differing steps and everything downstream of them or
        of a differing entry, in plan order. At run time a re-run whose outputs come out
        bit-identical stops the spread earlier."""
        changed = set(self.entries)
        rerun = []
        for index, step in enumerate(plan.main.steps):
            if self.reruns(index, step, changed):
                rerun.append(step.name)
                changed.update(name for name, _, _ in step.outputs)
        return rerun


def diff_plans(base: ExecutionPlan, other: ExecutionPlan) -> PlanDiff:
    """Compare two plans of one function (compiled under two precision models or
    profiles) step by step: see :class:`PlanDiff`."""
    base_steps, other_steps = base.main.steps, other.main.steps
    reads = tuple(step_reads(step) for step in other_steps)
    paired = len(base_steps) == len(other_steps) and all(
        a.name == b.name and a.op_type == b.op_type
        for a, b in zip(base_steps, other_steps, strict=True))
    if not paired or base.states or other.states or base.constants.keys() != other.constants.keys():
        return PlanDiff(frozenset(), {}, reads, shareable=False)
    entries = {name for name, storage in other.input_storage.items()
               if base.input_storage.get(name) != storage}
    entries.update(name for name, value in other.constants.items()
                   if not same_value(base.constants[name], value))
    differing = {a.name: why for a, b in zip(base_steps, other_steps, strict=True)
                 if (why := step_difference(a, b))}
    return PlanDiff(frozenset(entries), differing, reads)


def step_difference(base: Step, other: Step) -> str:
    """Why two plans' steps of one op compute differently (``""``: they do not)."""
    if base.fn is not other.fn:
        return "kernel"
    if base.ctx.dtype is not other.ctx.dtype:
        return "compute dtype"
    if base.dynamic != other.dynamic or base.tuples != other.tuples:
        return "argument conversion"
    if base.outputs != other.outputs:
        return "output storage"
    if base.static.keys() != other.static.keys() or not all(
            same_value(value, other.static[key]) for key, value in base.static.items()):
        return "constant arguments"
    if len(base.blocks) != len(other.blocks) or any(
            len(a.steps) != len(b.steps) or a.inputs != b.inputs or a.outputs != b.outputs
            or any(step_difference(x, y) for x, y in zip(a.steps, b.steps, strict=True))
            for a, b in zip(base.blocks, other.blocks, strict=True)):
        return "nested block"
    return ""


def step_reads(step: Step) -> frozenset[str]:
    """The values ``step`` reads from its environment: its dynamic and tuple arguments
    and, for control flow, every value its nested blocks read (their own values too: a
    superset is what deciding a re-run needs)."""
    names = {name for _, name, _ in step.dynamic}
    names.update(name for _, members in step.tuples for name, _ in members)
    for block in step.blocks:
        names.update(block.outputs)
        for inner in block.steps:
            names.update(step_reads(inner))
    return frozenset(names)


def same_value(a: Any, b: Any) -> bool:
    """Are two plan values (constants, kernel arguments) the same bits: arrays of one
    dtype and shape with equal bytes, lists of such, or equal plain values?"""
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype.hasobject:
            return bool(np.array_equal(a, b))
        return bool(np.array_equal(np.ascontiguousarray(a).view(np.uint8),
                                   np.ascontiguousarray(b).view(np.uint8)))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(
            same_value(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is not type(b):
        return False
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False

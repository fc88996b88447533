"""Device profiles: what the simulator knows about a device, as data plus kernel overrides.

A profile says where each op runs (the accelerator or CPU fallback), the precision
model of the accelerator, which kernel variant its published quirks are registered
under (see ``profiles/ane.py``), whether the accelerator rejects outputs whose
shape depends on data, and whether it leaves ops whose shape follows a flexible input
dimension to the CPU. Kernels never test for a profile: the profile selects kernel
variants, and the interpreter applies placement and shape rules from this record.
A profile is a model of *published* behaviour, not of the silicon.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nebisect.mil.dtypes import var_element_dtype
from nebisect.mil.graph import is_constant
from nebisect.registry import ImportOnce, Registry, package_modules


@dataclass(frozen=True)
class Profile:
    """A device model: placement rules, accelerator precision, kernel overrides."""

    name: str
    label: str
    precision: str
    variant: str
    device: str
    device_float_dtypes: frozenset[str]
    cpu_op_types: frozenset[str]
    rejects_data_dependent_shapes: bool
    #: an op whose output shape follows a flexible input dimension (a ``RangeDim``: every
    #: symbol in it is an input's) runs on the CPU, not the accelerator
    flexible_shapes_on_cpu: bool = False

    def place(self, op: Any, bound: frozenset[str] = frozenset()) -> str:
        """``device`` for ops the accelerator runs, ``cpu`` for fallback ops
        (:meth:`fallback` says why; ``bound``: the symbols the inputs' shapes bind)."""
        return "cpu" if self.fallback(op, bound) else self.device

    def fallback(self, op: Any, bound: frozenset[str] = frozenset()) -> str:
        """Why ``op`` falls back to the CPU, or ``""`` when the accelerator runs it.

        The accelerator runs an op that computes on floats of its own dtypes only: an op
        falls back when its type is in ``cpu_op_types`` (``unsupported op``), when its
        output shape follows a flexible input dimension — every symbol in it is one of
        ``bound``, the input shapes' — and the profile says so (``flexible shape``), when
        it reads or writes a float of another dtype (``fp32 dtype`` on the Neural
        Engine), or when it touches no float at all (``integer dtype``: integer shape
        arithmetic, bool logic). A shape with a symbol no input binds is data dependent:
        the op stays on the accelerator, which rejects it (:meth:`shape_error`).
        """
        if op.op_type in self.cpu_op_types:
            return "unsupported op"
        if self.flexible_shapes_on_cpu and _input_bound(op, bound):
            return "flexible shape"
        named = [_float_dtype_name(v) for v in (*_input_vars(op), *op.outputs)]
        floats = [name for name in named if name is not None]
        if not floats:
            return "integer dtype"
        foreign = sorted({name for name in floats if name not in self.device_float_dtypes})
        return f"{'/'.join(foreign)} dtype" if foreign else ""

    def shape_error(self, function: Any, placement: dict[str, str]) -> str | None:
        """The device's message for an accelerator op whose output shape depends on data.

        A symbolic dimension not bound to any input dimension can only be known by
        running the graph; the accelerator needs every blob shape before it runs.
        Program outputs are checked first (they are what the device reports), then
        every other accelerator op in program order.
        """
        if not self.rejects_data_dependent_shapes:
            return None
        bound = bound_symbols(function)
        candidates = [*function.outputs, *(v for op in _walk(function) for v in op.outputs)]
        for var in candidates:
            op = var.op
            if op is None or not op.outputs or placement.get(op.outputs[0].name) != self.device:
                continue
            if var_element_dtype(var) is None:  # lists and other non-tensors
                continue
            shape = var.shape or ()
            free = [s for s in shape if _symbolic(s) and not symbols_of(s) <= bound]
            if free:
                dims = ", ".join("?" if _symbolic(s) else str(s) for s in shape)
                return (
                    "Invalid blob shape: Data-dependent shapes were disabled: "
                    f"{var.name} - [{dims}]"
                )
        return None


def _symbolic(size: Any) -> bool:
    return not isinstance(size, (int, np.integer))


def symbols_of(size: Any) -> frozenset[str]:
    """The symbols a symbolic dimension is computed from: itself, or those of an
    expression (a conv's ``is0 - 2``)."""
    found = getattr(size, "free_symbols", None)
    return frozenset(str(s) for s in found) if found else frozenset({str(size)})


def bound_symbols(function: Any) -> frozenset[str]:
    """The symbols ``function``'s input shapes bind (its flexible dimensions), and those
    computed from them by shape alone.

    coremltools' loader gives a computed dimension (a conv's output length) a symbol of
    its own. It follows the input's when the op that makes it reads only floats besides
    constants, all of input-bound shapes: then only shapes flowed into it. An op that
    reads a computed integer tensor (a ``shape`` turned into a ``reshape`` or ``tile``
    target, ``non_zero``'s indices) makes a dimension from values: data dependent, as
    Core ML infers seed 003's mean-pool ``[?, 768]``.
    """
    bound = {name for var in function.inputs.values() for size in (var.shape or ())
             if _symbolic(size) for name in symbols_of(size)}
    for op in function.operations:
        dynamic = [v for v in _input_vars(op) if v.op is None or not is_constant(v.op)]
        if op.blocks or any(_float_dtype_name(v) is None or not _shape_symbols(v) <= bound
                            for v in dynamic):
            continue
        bound.update(name for var in op.outputs for name in _shape_symbols(var))
    return frozenset(bound)


def _shape_symbols(var: Any) -> frozenset[str]:
    """The symbols in ``var``'s shape; none for a list or another non-tensor."""
    if var_element_dtype(var) is None:
        return frozenset()
    return frozenset(name for size in (var.shape or ()) if _symbolic(size)
                     for name in symbols_of(size))


def _input_bound(op: Any, bound: frozenset[str]) -> bool:
    """Does ``op`` output a tensor with a symbolic dimension, every one of them computed
    from the symbols in ``bound`` alone?"""
    dims = [size for var in op.outputs if var_element_dtype(var) is not None
            for size in (var.shape or ()) if _symbolic(size)]
    return bool(dims) and all(symbols_of(size) <= bound for size in dims)


def _input_vars(op: Any) -> list[Any]:
    found: list[Any] = []
    for key, value in op.inputs.items():
        if key.startswith("_"):
            continue
        found.extend(value if isinstance(value, (list, tuple)) else (value,))
    return found


def _float_dtype_name(var: Any) -> str | None:
    from coremltools.converters.mil.mil import types

    sym_type = var.sym_type
    primitive = sym_type.get_primitive() if types.is_tensor(sym_type) else sym_type
    if types.is_float(primitive):
        return types.builtin_to_string(primitive)
    return None


def _walk(block: Any) -> list[Any]:
    ops = []
    for op in block.operations:
        if op.op_type != "const":
            ops.append(op)
        for sub in op.blocks:
            ops.extend(_walk(sub))
    return ops


#: Profiles by name; loading imports the profile modules (their kernel overrides too).
PROFILES: Registry[str, Profile] = Registry("device profile", ImportOnce(package_modules(__name__)))


def register_profile(profile: Profile) -> Profile:
    """Add a profile to the registry; a duplicate name is an error."""
    return PROFILES.register(profile.name, profile)


def get_profile(name: str) -> Profile:
    """The profile called ``name``, or a user error naming the known ones."""
    return PROFILES.get(name)

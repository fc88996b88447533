"""Standalone ``repro.py`` scripts: what a maintainer asks for, written from a reduction.

A repro rebuilds the minimized model from source — coremltools' MIL builder calls
printed from the :class:`~nebisect.minimize.graphs.mil.SubgraphPlan` (the same data
:func:`~nebisect.minimize.graphs.mil.build` replays, so script and package cannot disagree), or
the plain torch module of a :class:`~nebisect.minimize.graphs.fx.TorchCandidate` — runs it the
way the failure was seen, and prints the symptom. It needs numpy and coremltools (plus
torch for torch models) and reads only the files beside it (``inputs.npz``, and
``constants.npz`` / ``weights.npz`` for tensors too large to print).

Where it runs: on macOS the program is converted and predicted on Core ML with the
compute units of the target; elsewhere Core ML cannot predict, so it uses nebisect's
MIL simulator when nebisect is importable, and says so. Exit code 0 means the symptom
reproduced, 1 that it did not, 2 that it could not run here.

On a device target (``coreml:ne`` …, ``coreml-remote:…``) a pass on CPU fallback is not
a pass: the script asserts with ``MLComputePlan`` that the op of interest — the last
compute op the reduction kept, where the failure enters (:func:`op_of_interest`) — runs
on the requested unit, as seed 000's repro does. A minimized graph whose only compute
op is that op would stay on the CPU (seed 000: "smaller topologies compile but
reduce_log_sum_exp routes to CPU"), so the script then keeps the ``ne-attract`` wrapper
of :mod:`nebisect.fuzzing.builders`: identity 1×1 conv on the inputs, a linear head on the
op, neither judged. Simulator targets get neither (their repro is the graph as kept).
"""

from __future__ import annotations

import ast
import keyword
import math
import re
import textwrap
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.arrays import save_npz
from nebisect.minimize.graphs.fx import TorchCandidate, docstring_text
from nebisect.minimize.graphs.mil import PlanOp, SubgraphPlan
from nebisect.minimize.repro import templates
from nebisect.sources.torch_module import FACTORY_SEED, PATHS
from nebisect.targets.placement import NOT_COMPUTE, required_devices
from nebisect.targets.spec import TargetSpec

#: Constants with more elements than this go to ``constants.npz`` instead of the code.
INLINE_LIMIT = 64
#: Simulator standing in for each Core ML compute-unit target off macOS.
_SIM_FOR_COREML = {"cpu": "sim:fp32", "gpu": "sim:fp16", "ne": "sim:ane", "all": "sim:ane"}
#: Core ML compute units standing in for each simulator target on macOS.
_UNITS_FOR_SIM = {"fp64": "CPU_ONLY", "fp32": "CPU_ONLY", "fp16": "CPU_AND_GPU",
                  "fp16-naive": "CPU_AND_GPU", "ane": "CPU_AND_NE"}
_UNITS_FOR_COREML = {"cpu": "CPU_ONLY", "gpu": "CPU_AND_GPU", "ne": "CPU_AND_NE", "all": "ALL"}
_RESERVED = {"mb", "np", "ct", "types", "main", "program", "symbols", "inputs", "CONSTANTS",
             "Function", "Program", "get_new_symbol", "ne_attract_input", "ne_attract_head"}
#: Backends that run on real Core ML, where placement is asserted.
DEVICE_BACKENDS = ("coreml", "coreml-remote")


def devices_for(target: TargetSpec) -> tuple[str, str]:
    """(Core ML compute units on macOS, simulator target elsewhere) for a target spec."""
    if target.backend in DEVICE_BACKENDS:
        return _UNITS_FOR_COREML[target.variant], _SIM_FOR_COREML[target.variant]
    if target.backend == "sim":
        return _UNITS_FOR_SIM[target.variant], str(target)
    return "CPU_ONLY", "sim:fp32"


def op_of_interest(target: TargetSpec, plan: SubgraphPlan) -> str:
    """The op type a device repro asserts the placement of: the last compute op of the
    minimized plan ('' for targets that require no device, e.g. every simulator)."""
    if target.backend not in DEVICE_BACKENDS or not required_devices(str(target)):
        return ""
    compute = [op.op_type for op in plan.ops if op.op_type not in NOT_COMPUTE]
    return compute[-1] if compute else ""


def attracted_value(target: TargetSpec, plan: SubgraphPlan, op_type: str) -> str:
    """The value the ``ne-attract`` head reads when the plan is too small to be routed to
    the Neural Engine ('' when no wrapper is needed)."""
    if not op_type or "ne" not in required_devices(str(target)):
        return ""
    compute = [op for op in plan.ops if op.op_type not in NOT_COMPUTE]
    if any(op.op_type != op_type for op in compute):
        return ""
    return compute[-1].outputs[0]


# --------------------------------------------------------------------------- literals
def literal(value: Any) -> str:
    """Python source that evaluates to ``value`` with its numpy dtype."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biuf":
            return f"np.array({value.tolist()!r})"
        data = f"np.array({_items(value.reshape(-1))}, dtype={value.dtype.name!r})"
        return data if value.ndim == 1 else f"{data}.reshape({tuple(value.shape)!r})"
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        kind = "bool_" if value.dtype.kind == "b" else value.dtype.name
        return f"np.{kind}({_scalar(value.item())})"
    if isinstance(value, float):
        return _scalar(value)
    return repr(value.item() if isinstance(value, np.generic) else value)


def _items(flat: np.ndarray) -> str:
    return "[" + ", ".join(_scalar(v) for v in flat.tolist()) + "]"


def _scalar(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return "np.nan" if math.isnan(value) else ("np.inf" if value > 0 else "-np.inf")
    return repr(value)


def _identifiers(names: list[str]) -> dict[str, str]:
    """A unique Python identifier for each MIL value name (readable, never reserved)."""
    chosen: dict[str, str] = {}
    taken = set(_RESERVED)
    for name in names:
        base = re.sub(r"\W", "_", name)
        if not base or base[0].isdigit() or keyword.iskeyword(base):
            base = f"v_{base}"
        ident, n = base, 1
        while ident in taken:
            n += 1
            ident = f"{base}_{n}"
        taken.add(ident)
        chosen[name] = ident
    return chosen


# --------------------------------------------------------------------------- MIL
def builder_source(plan: SubgraphPlan, attract: str = "") -> tuple[str, dict[str, np.ndarray]]:
    """``build_program()`` as MIL builder source, and the constants it loads from
    ``constants.npz`` (those larger than :data:`INLINE_LIMIT` elements); with
    ``attract`` (a value name) inside the ``ne-attract`` wrapper."""
    names = [e.var for e in plan.inputs] + [e.name for e in plan.inputs]
    names += [o for op in plan.ops for o in op.outputs]
    ident = _identifiers(list(dict.fromkeys(names)))
    symbols = sorted({d for e in plan.inputs for d in e.shape if isinstance(d, str)})
    lines = ["def build_program() -> Program:",
             '    """The minimized program, op for op, with the original value names."""']
    if symbols:
        lines.append(f"    symbols = {{name: get_new_symbol() for name in {symbols!r}}}")
    lines.append("    inputs = {")
    for entry in plan.inputs:
        shape = ", ".join(str(d) if isinstance(d, int) else f"symbols[{d!r}]"
                          for d in entry.shape)
        lines.append(f"        {entry.name!r}: mb.placeholder(shape=[{shape}], "
                     f"dtype=types.{entry.dtype}),")
    lines.append("    }")
    lines.append(f"    with Function(inputs, opset_version=ct.target.{_opset_name(plan)}) "
                 "as main:")
    for entry in plan.inputs:
        lines.extend(_input_lines(entry, ident, wrap=bool(attract)))
    constants: dict[str, np.ndarray] = {}
    for op in plan.ops:
        lines.extend(_op_lines(op, ident, constants))
    outputs = ", ".join(ident[name] for name in plan.outputs)
    head = f" + ne_attract_head({ident[attract]})" if attract else ""
    lines += [f"        main.set_outputs([{outputs}]{head})",
              "    program = Program()",
              '    program.add_function("main", main)',
              "    return program"]
    return "\n".join(lines) + "\n", constants


def _opset_name(plan: SubgraphPlan) -> str:
    name = getattr(plan.opset, "name", None)
    if not name:
        raise ValueError(f"plan opset {plan.opset!r} has no coremltools target name")
    return str(name)


def _input_lines(entry: Any, ident: dict[str, str], wrap: bool = False) -> list[str]:
    """The lines that produce an input's value; ``wrap`` feeds a static float input
    through the ``ne-attract`` identity conv."""
    source = f"main.inputs[{entry.name!r}]"
    if wrap and not entry.cast_to and not entry.squeeze and entry.dtype in ("fp16", "fp32") \
            and all(isinstance(d, int) for d in entry.shape):
        return [f"        {ident[entry.var]} = ne_attract_input({source})"]
    lines = []
    if entry.cast_to:
        name = f"{entry.var}__cast" if entry.squeeze else entry.var
        target = ident[entry.var] if not entry.squeeze else f"{ident[entry.var]}_cast"
        lines.append(f"        {target} = mb.cast(x={source}, dtype={entry.cast_to!r}, "
                     f"name={name!r})")
        source = target
    if entry.squeeze:
        lines.append(f"        {ident[entry.var]} = mb.squeeze(x={source}, name={entry.var!r})")
    elif not entry.cast_to:
        lines.append(f"        {ident[entry.var]} = {source}")
    return lines


def _op_lines(op: PlanOp, ident: dict[str, str], constants: dict[str, np.ndarray]) -> list[str]:
    if op.op_type == "const":
        value = op.value
        if isinstance(value, np.ndarray) and value.size > INLINE_LIMIT:
            constants[op.name] = value
            text = f"CONSTANTS[{op.name!r}]"
        else:
            text = literal(value)
        return [f"        {ident[op.outputs[0]]} = mb.const(val={text}, name={op.name!r})"]
    args = ", ".join(
        f"{param}=[{', '.join(ident[n] for n in arg)}]" if isinstance(arg, list)
        else f"{param}={ident[arg]}"
        for param, arg in op.args.items()
    )
    targets = ", ".join(ident[o] for o in op.outputs)
    call = f"mb.{op.op_type}({args}{', ' if args else ''}name={op.name!r})"
    if len(op.outputs) == 1:
        lines = [f"        {targets} = {call}"]
        if op.outputs[0] != op.name:
            lines.append(f"        {targets}.set_name({op.outputs[0]!r})")
        return lines
    lines = [f"        {targets} = {call}"]
    lines += [f"        {ident[o]}.set_name({o!r})" for o in op.outputs]
    return lines


def mil_script(plan: SubgraphPlan, *, signature: str, target: TargetSpec, header: str,
               op_of_interest: str = "") -> tuple[str, dict[str, np.ndarray]]:
    """The repro script for a MIL plan, and the large constants it reads; on a device
    it asserts that ``op_of_interest`` ran where ``target`` asks."""
    units, sim = devices_for(target)
    attract = attracted_value(target, plan, op_of_interest)
    build, constants = builder_source(plan, attract)
    script = templates.MIL_HEADER.format(
        header=docstring_text(header), quoted_signature=docstring_text(signature),
        target=target, units=units, sim=sim, build=build,
    ) + _settings(signature, target, op_of_interest) + templates.ORACLE \
        + (templates.NE_ATTRACT if attract else "") + templates.ON_DEVICE \
        + templates.MIL_MAIN.format(opset=_opset_name(plan))
    return script, constants


def _settings(signature: str, target: TargetSpec, op_of_interest: str) -> str:
    units, sim = devices_for(target)
    return templates.SETTINGS.format(signature=signature, target=str(target), units=units,
                                     sim=sim, precision=target.precision,
                                     op_of_interest=op_of_interest)


def write_mil_repro(directory: Path, plan: SubgraphPlan, *, signature: str, target: TargetSpec,
                    header: str, op_of_interest: str = "") -> Path:
    """``repro.py`` (+ ``constants.npz`` when needed) and ``inputs.npz`` in ``directory``."""
    script, constants = mil_script(plan, signature=signature, target=target, header=header,
                                   op_of_interest=op_of_interest)
    directory.mkdir(parents=True, exist_ok=True)
    save_npz(directory / "inputs.npz", plan.feeds)
    if constants:
        save_npz(directory / "constants.npz", constants)
    path = directory / "repro.py"
    path.write_text(script)
    return path


# --------------------------------------------------------------------------- torch
def torch_script(candidate: TorchCandidate, *, signature: str, message: str, target: TargetSpec,
                 stage: str, setup: tuple[str, ...], header: str,
                 op_of_interest: str = "") -> str:
    """The repro script for a torch candidate: one that fails to convert (``stage``
    ``convert``), or whose converted model fails on ``target`` (``predict``)."""
    module = candidate.module_source(_torch_header(header, signature, stage, target,
                                                   templates.TORCH_NEEDS_FILES))
    return _torch_body(module, templates.TORCH_LOAD_MINIMIZED, signature=signature,
                       message=message, target=target, stage=stage, setup=setup,
                       paths=PATHS, op_of_interest=op_of_interest)


def factory_script(module_source: str, factory: str, inputs: str, *, names: list[str],
                   inputs_doc: str, signature: str, message: str, target: TargetSpec, stage: str,
                   setup: tuple[str, ...], header: str, paths: tuple[str, ...]) -> str:
    """The repro script of a torch factory's failure: ``module_source`` (the factory's
    file, as :func:`factory_module` splits it) inline, the trigger's ``inputs`` (the
    body of ``trigger_inputs``: :func:`inline_inputs`, or :data:`~.templates.EXAMPLE_INPUTS`)
    named ``names``, converted on ``paths`` in that order: no file beside it, and
    nothing of nebisect imported on macOS unless ``setup`` names nebisect's fixes."""
    future, body = factory_module(module_source)
    head = _torch_header(header, signature, stage, target, templates.TORCH_NEEDS_INLINE)
    module = "\n".join([f'"""{docstring_text(head)}"""', *future]) \
        + templates.FACTORY_SEEDING.format(seed=FACTORY_SEED) + body.strip("\n") + "\n" \
        + templates.FACTORY_INPUTS.format(names=names, what=docstring_text(inputs_doc),
                                          inputs=inputs)
    return _torch_body(module, templates.TORCH_LOAD_FACTORY.format(factory=factory),
                       signature=signature, message=message, target=target, stage=stage,
                       setup=setup, paths=paths)


def _torch_header(header: str, signature: str, stage: str, target: TargetSpec, needs: str) -> str:
    units, sim = devices_for(target)
    what = (templates.TORCH_CONVERT_WHAT if stage == "convert"
            else templates.TORCH_PREDICT_WHAT.format(units=units, sim=sim))
    return templates.TORCH_HEADER.format(header=header, signature=signature, what=what,
                                         needs=needs)


def _torch_body(module: str, load: str, *, signature: str, message: str, target: TargetSpec,
                stage: str, setup: tuple[str, ...], paths: tuple[str, ...],
                op_of_interest: str = "") -> str:
    """``module`` (which defines the model and ``INPUT_NAMES``), the conversion recipe,
    ``load`` (its ``load_module``) and the ``main`` of ``stage``."""
    script = module + templates.TORCH_CONVERSION.format(setup=list(setup), paths=list(paths)) \
        + load
    if stage == "convert":
        return script + templates.TORCH_CONVERT_MAIN.format(
            signature=signature, message=message, precision=target.precision)
    return (script + _settings(signature, target, op_of_interest) + templates.ORACLE
            + templates.ON_DEVICE + templates.TORCH_PREDICT_MAIN.format())


def factory_module(text: str) -> tuple[list[str], str]:
    """A factory file split for inlining below a script's own docstring: its
    ``from __future__`` imports (which must come first) and the rest of it, its module
    docstring left out."""
    tree = ast.parse(text)
    lines = text.splitlines()
    dropped: set[int] = set()
    future = []
    for index, node in enumerate(tree.body):
        value = node.value if isinstance(node, ast.Expr) else None
        is_docstring = index == 0 and isinstance(value, ast.Constant) and isinstance(
            value.value, str)
        is_future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if is_docstring or is_future:
            span = range(node.lineno - 1, (node.end_lineno or node.lineno))
            dropped.update(span)
            if is_future:
                future += [lines[i] for i in span]
    return future, "\n".join(line for i, line in enumerate(lines) if i not in dropped)


def inline_inputs(arrays: dict[str, np.ndarray]) -> str:
    """``trigger_inputs``' body returning ``arrays`` as literals: a constant fill as
    ``np.full``, other numeric arrays as their values in lines of readable width (each
    value in the fewest digits that read back as the same value of its dtype)."""
    lines = ["    return {"]
    for name, array in arrays.items():
        flat = array.reshape(-1)
        if array.size > 1 and array.dtype.kind in "biuf" and (flat == flat[0]).all():
            lines.append(f"        {name!r}: np.full({tuple(array.shape)!r}, "
                         f"{_shortest(flat[0])}, dtype={array.dtype.name!r}),")
        elif array.dtype.kind in "biuf" and array.ndim:
            values = textwrap.wrap(", ".join(map(_shortest, flat)), 84,
                                   break_long_words=False, break_on_hyphens=False)
            shape = "" if array.ndim == 1 else f".reshape({tuple(array.shape)!r})"
            lines += [f"        {name!r}: np.array([",
                      *(f"            {line}" for line in values),
                      f"        ], dtype={array.dtype.name!r}){shape},"]
        else:
            lines.append(f"        {name!r}: {literal(array)},")
    return "\n".join([*lines, "    }"])


def _shortest(value: np.generic) -> str:
    """A numpy scalar in the fewest digits that parse back to it in its own dtype."""
    if value.dtype.kind == "f" and math.isfinite(value):
        return str(value)
    return _scalar(value.item())


def write_torch_repro(directory: Path, candidate: TorchCandidate, *, signature: str,
                      message: str, target: TargetSpec, stage: str, setup: tuple[str, ...],
                      header: str) -> Path:
    """``repro.py``, ``model.py`` (the minimized torch source), ``weights.npz`` and
    ``inputs.npz`` in ``directory``."""
    candidate.write(directory, header)
    path = directory / "repro.py"
    path.write_text(torch_script(candidate, signature=signature, message=message,
                                 target=target, stage=stage, setup=setup, header=header))
    return path

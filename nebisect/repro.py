"""Standalone ``repro.py`` scripts: what a maintainer asks for, written from a reduction.

A repro rebuilds the minimized model from source — coremltools' MIL builder calls
printed from the :class:`~nebisect.graphs.mil.Plan` (the same data
:func:`~nebisect.graphs.mil.build` replays, so script and package cannot disagree), or
the plain torch module of a :class:`~nebisect.graphs.fx.TorchCandidate` — runs it the
way the failure was seen, and prints the symptom. It needs numpy and coremltools (plus
torch for torch models) and reads only the files beside it (``inputs.npz``, and
``constants.npz`` / ``weights.npz`` for tensors too large to print).

Where it runs: on macOS the program is converted and predicted on Core ML with the
compute units of the target; elsewhere Core ML cannot predict, so it uses nebisect's
MIL simulator when nebisect is importable, and says so. Exit code 0 means the symptom
reproduced, 1 that it did not, 2 that it could not run here.
"""

from __future__ import annotations

import keyword
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.case import parse_target, save_npz
from nebisect.graphs.fx import TorchCandidate, docstring_text
from nebisect.graphs.mil import Plan, PlanOp

#: Constants with more elements than this go to ``constants.npz`` instead of the code.
INLINE_LIMIT = 64
#: Simulator standing in for each Core ML compute-unit target off macOS.
_SIM_FOR_COREML = {"cpu": "sim:fp32", "gpu": "sim:fp16", "ne": "sim:ane", "all": "sim:ane"}
#: Core ML compute units standing in for each simulator target on macOS.
_UNITS_FOR_SIM = {"fp64": "CPU_ONLY", "fp32": "CPU_ONLY", "fp16": "CPU_AND_GPU",
                  "fp16-naive": "CPU_AND_GPU", "ane": "CPU_AND_NE"}
_UNITS_FOR_COREML = {"cpu": "CPU_ONLY", "gpu": "CPU_AND_GPU", "ne": "CPU_AND_NE", "all": "ALL"}
_RESERVED = {"mb", "np", "ct", "types", "main", "program", "symbols", "inputs", "CONSTANTS",
             "Function", "Program", "get_new_symbol"}


def devices_for(target: str) -> tuple[str, str]:
    """(Core ML compute units on macOS, simulator target elsewhere) for a target spec."""
    spec = parse_target(target)
    if spec.backend == "coreml":
        return _UNITS_FOR_COREML[spec.variant], _SIM_FOR_COREML[spec.variant]
    if spec.backend == "sim":
        return _UNITS_FOR_SIM[spec.variant], str(spec)
    return "CPU_ONLY", "sim:fp32"


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
def builder_source(plan: Plan) -> tuple[str, dict[str, np.ndarray]]:
    """``build_program()`` as MIL builder source, and the constants it loads from
    ``constants.npz`` (those larger than :data:`INLINE_LIMIT` elements)."""
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
        lines.extend(_input_lines(entry, ident))
    constants: dict[str, np.ndarray] = {}
    for op in plan.ops:
        lines.extend(_op_lines(op, ident, constants))
    outputs = ", ".join(ident[name] for name in plan.outputs)
    lines += [f"        main.set_outputs([{outputs}])",
              "    program = Program()",
              '    program.add_function("main", main)',
              "    return program"]
    return "\n".join(lines) + "\n", constants


def _opset_name(plan: Plan) -> str:
    name = getattr(plan.opset, "name", None)
    if not name:
        raise ValueError(f"plan opset {plan.opset!r} has no coremltools target name")
    return str(name)


def _input_lines(entry: Any, ident: dict[str, str]) -> list[str]:
    source = f"main.inputs[{entry.name!r}]"
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


def mil_script(plan: Plan, *, signature: str, target: str, header: str) -> tuple[
        str, dict[str, np.ndarray]]:
    """The repro script for a MIL plan, and the large constants it reads."""
    units, sim = devices_for(target)
    build, constants = builder_source(plan)
    return _MIL_TEMPLATE.format(
        header=docstring_text(header), quoted_signature=docstring_text(signature),
        signature=signature, target=target, units=units, sim=sim,
        precision=parse_target(target).precision, build=build,
        opset=_opset_name(plan),
    ), constants


def write_mil_repro(directory: Path, plan: Plan, *, signature: str, target: str,
                    header: str) -> Path:
    """``repro.py`` (+ ``constants.npz`` when needed) and ``inputs.npz`` in ``directory``."""
    script, constants = mil_script(plan, signature=signature, target=target, header=header)
    save_npz(directory / "inputs.npz", plan.feeds)
    if constants:
        save_npz(directory / "constants.npz", constants)
    path = directory / "repro.py"
    path.write_text(script)
    return path


# --------------------------------------------------------------------------- torch
def torch_script(candidate: TorchCandidate, *, signature: str, message: str, precision: str,
                 setup: tuple[str, ...], header: str) -> str:
    """The repro script for a torch candidate that fails to convert."""
    module = candidate.module_source(_TORCH_HEADER.format(header=header, signature=signature))
    return module + _TORCH_TEMPLATE.format(
        signature=signature, message=message, precision=precision, setup=list(setup),
    )


def write_torch_repro(directory: Path, candidate: TorchCandidate, *, signature: str,
                      message: str, precision: str, setup: tuple[str, ...],
                      header: str) -> Path:
    """``repro.py``, ``model.py`` (the minimized torch source), ``weights.npz`` and
    ``inputs.npz`` in ``directory``."""
    candidate.write(directory, header)
    path = directory / "repro.py"
    path.write_text(torch_script(candidate, signature=signature, message=message,
                                 precision=precision, setup=setup, header=header))
    return path


_MIL_TEMPLATE = '''#!/usr/bin/env python3
"""{header}

Symptom: {quoted_signature}
Target:  {target} — on macOS Core ML with compute units {units}; elsewhere nebisect's
         MIL simulator {sim} (a model of published device behaviour, not the silicon),
         used only if nebisect is importable.

Needs numpy and coremltools; reads inputs.npz (and constants.npz, if present) beside it.
Exit code: 0 the symptom reproduced, 1 it did not, 2 it cannot run here.
"""

import platform
import sys
from pathlib import Path

import coremltools as ct
import numpy as np
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import Function, Program, get_new_symbol, types

HERE = Path(__file__).resolve().parent
EXPECTED = {signature!r}
COMPUTE_UNITS = {units!r}
SIM_TARGET = {sim!r}
PRECISION = {precision!r}


def load_arrays(name):
    path = HERE / name
    if not path.is_file():
        return {{}}
    with np.load(path, allow_pickle=False) as data:
        return {{key: data[key] for key in data.files}}


CONSTANTS = load_arrays("constants.npz")


{build}

def predict_coreml(program, inputs, units):
    model = ct.convert(
        program, convert_to="mlprogram", compute_units=getattr(ct.ComputeUnit, units),
        compute_precision=ct.precision.FLOAT32, pass_pipeline=ct.PassPipeline.EMPTY,
        minimum_deployment_target=ct.target.{opset},
    )
    return {{name: np.asarray(value) for name, value in model.predict(inputs).items()}}


def predict_simulator(program, inputs, target):
    from nebisect.targets import get_target

    return get_target(target).predict(program, inputs).outputs


def judge(reference, outputs):
    """nebisect's oracle when importable; else a plain fp16/fp32 ULP check."""
    try:
        from nebisect.verdict import judge as nebisect_judge
    except ImportError:
        return plain_judge(reference, outputs)
    verdict = nebisect_judge(reference, outputs, PRECISION)
    return verdict.signature if verdict.failed else "pass", verdict.message


def plain_judge(reference, outputs):
    dtype = np.float16 if PRECISION == "fp16" else np.float32
    for name in sorted(reference):
        ref = np.asarray(reference[name], np.float64)
        out = np.asarray(outputs[name], np.float64)
        if out.shape != ref.shape:
            return "mismatch:shape", f"{{name}}: shape {{out.shape}} vs {{ref.shape}}"
        in_range = np.isfinite(ref) & (np.abs(ref) <= np.finfo(dtype).max)
        scale = float(np.max(np.abs(ref[in_range]), initial=0.0))
        allowed = 16 * np.spacing(np.abs(ref).astype(dtype)).astype(np.float64) + (
            16 * scale * np.finfo(dtype).eps)
        error = np.where(in_range, np.abs(out - ref), 0.0)
        checks = [
            ("nan-suppressed", np.isnan(ref) & ~np.isnan(out)),
            ("nonfinite", in_range & ~np.isfinite(out)),
            ("collapse", in_range & (np.abs(out) <= 1e-6 * max(scale, 1.0))
             & (np.abs(ref) >= 1.0) & (error > allowed)),
            ("tolerance", in_range & (error > allowed)),
        ]
        for kind, bad in checks:
            if bad.any():
                at = np.unravel_index(int(np.flatnonzero(bad)[0]), ref.shape)
                return (f"mismatch:{{kind}}", f"{{name}}{{list(at)}}: output {{out[at]:.6g}} "
                        f"vs reference {{ref[at]:.6g}}")
    return "pass", ""


def error_signature(exc):
    message = f"{{type(exc).__name__}}: {{exc}}"
    try:
        from nebisect.verdict import error_signature as nebisect_signature
    except ImportError:
        return "error:predict:" + message.splitlines()[0], message
    return nebisect_signature("predict", message), message


def main():
    program = build_program()
    inputs = load_arrays("inputs.npz")
    if platform.system() == "Darwin":
        where = f"Core ML, compute units {{COMPUTE_UNITS}}"
        run = lambda: predict_coreml(build_program(), inputs, COMPUTE_UNITS)  # noqa: E731
    else:
        try:
            import nebisect.targets  # noqa: F401
        except ImportError:
            print("Core ML cannot predict on this OS and nebisect's simulator is not "
                  "installed: run this on macOS.")
            return 2
        where = f"nebisect's simulator {{SIM_TARGET}} (Core ML cannot predict here)"
        run = lambda: predict_simulator(program, inputs, SIM_TARGET)  # noqa: E731
    print(f"running on {{where}}")
    try:
        outputs = run()
    except Exception as exc:
        observed, detail = error_signature(exc)
    else:
        try:
            reference = predict_simulator(build_program(), inputs, "sim:fp64")
        except ImportError:
            reference = predict_coreml(build_program(), inputs, "CPU_ONLY")
        observed, detail = judge(reference, outputs)
    print(f"observed: {{observed}}")
    if detail:
        print(f"          {{detail}}")
    print(f"expected: {{EXPECTED}}")
    reproduced = observed == EXPECTED
    print("REPRODUCED" if reproduced else "NOT REPRODUCED")
    return 0 if reproduced else 1


if __name__ == "__main__":
    sys.exit(main())
'''

_TORCH_HEADER = """{header}

Symptom: {signature}

Converts the module below with coremltools on both torch paths, as nebisect does —
torch.export (+ run_decompositions({{}})) and jit.trace — and prints each converter's
message. Needs numpy, torch and coremltools (conversion runs on any OS); reads
weights.npz and inputs.npz beside it. Exit code: 0 the symptom reproduced, 1 it did not.
"""

_TORCH_TEMPLATE = '''

# --------------------------------------------------------------------------- repro
import sys  # noqa: E402

import coremltools as ct  # noqa: E402

EXPECTED_SIGNATURE = {signature!r}
EXPECTED_MESSAGE = {message!r}
PRECISION = {precision!r}  # the target's: fp16 targets get a FLOAT16 program
SETUP = {setup!r}  # converter fixes that were active (nebisect module:function)


def input_types(inputs, shapes):
    """Core ML inputs: int32 for integers, float32 for floats; with ``shapes``, one
    shared RangeDim per dynamic range (so equal lengths stay equal)."""
    ranges = {{}}
    for name, axes in DYNAMIC_DIMS.items():
        for axis, (lo, hi) in axes.items():
            default = int(inputs[name].shape[axis])
            ranges.setdefault((lo, hi), ct.RangeDim(lo, hi, default=default))
    types = []
    for name, tensor in inputs.items():
        kwargs = {{"name": name,
                  "dtype": np.float32 if tensor.dtype.is_floating_point else np.int32}}
        if shapes:
            axes = DYNAMIC_DIMS.get(name, {{}})
            kwargs["shape"] = ct.Shape([ranges[axes[i]] if i in axes else int(n)
                                        for i, n in enumerate(tensor.shape)])
        types.append(ct.TensorType(**kwargs))
    return types


def options(module, inputs):
    with torch.no_grad():
        result = module(**inputs)
    names = (["output"] if isinstance(result, torch.Tensor)
             else [f"output_{{i}}" for i in range(len(result))])
    return {{
        "convert_to": "mlprogram",
        "compute_precision": (ct.precision.FLOAT16 if PRECISION == "fp16"
                              else ct.precision.FLOAT32),
        "minimum_deployment_target": ct.target.iOS18,
        "outputs": [ct.TensorType(name=name) for name in names],
    }}


def via_export(module, inputs):
    dims = {{}}
    for axes in DYNAMIC_DIMS.values():
        for bounds in axes.values():
            dims.setdefault(tuple(bounds), torch.export.Dim(f"dim{{len(dims)}}",
                                                            min=bounds[0], max=bounds[1]))
    dynamic = {{name: ({{a: dims[tuple(b)] for a, b in DYNAMIC_DIMS[name].items()}}
                       if name in DYNAMIC_DIMS else None) for name in inputs}}
    program = torch.export.export(module, tuple(inputs.values()),
                                  dynamic_shapes=dynamic if DYNAMIC_DIMS else None)
    ct.convert(program.run_decompositions({{}}), inputs=input_types(inputs, False),
               **options(module, inputs))


def via_trace(module, inputs):
    traced = torch.jit.trace(module, tuple(inputs.values()))
    ct.convert(traced, inputs=input_types(inputs, True), **options(module, inputs))


def main():
    import importlib

    for reference in SETUP:
        module_name, _, function = reference.partition(":")
        getattr(importlib.import_module(module_name), function)()
    module = Minimized(load_arrays("weights.npz")).eval()
    arrays = load_arrays("inputs.npz")
    inputs = {{name: torch.from_numpy(arrays[name]) for name in INPUT_NAMES}}
    results = []
    for label, convert in (("torch.export", via_export), ("jit.trace", via_trace)):
        try:
            convert(module, inputs)
        except Exception as exc:
            lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
            results.append((label, f"{{type(exc).__name__}}: "
                                   f"{{lines[0] if lines else '(no message)'}}"))
        else:
            results.append((label, None))
    summary = " | ".join(f"{{label}}: {{message or 'ok'}}" for label, message in results)
    failed = all(message for _, message in results)
    print(summary)
    try:
        from nebisect.verdict import error_signature
    except ImportError:
        observed, expected = (summary if failed else "pass"), EXPECTED_MESSAGE
    else:
        observed = error_signature("convert", summary) if failed else "pass"
        expected = EXPECTED_SIGNATURE
    print(f"observed: {{observed}}")
    print(f"expected: {{expected}}")
    reproduced = observed == expected
    print("REPRODUCED" if reproduced else "NOT REPRODUCED")
    return 0 if reproduced else 1


if __name__ == "__main__":
    sys.exit(main())
'''

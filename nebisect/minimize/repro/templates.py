"""The text of generated ``repro.py`` scripts (``str.format`` templates; see
:mod:`nebisect.minimize.repro.script`, which fills them).

A script is assembled from pieces so that what two kinds of repro share is written
once: the oracle (nebisect's ``judge`` when importable, else a plain ULP check), the
torch conversion recipe (coremltools' two torch paths, as :mod:`nebisect.sources.convert` runs
them), and one ``main`` per symptom kind. Everything here is *generated code*: it must
run with numpy + coremltools (+ torch) alone, so it restates — in a few lines — what
nebisect's own modules do, and defers to them whenever nebisect is importable.
"""

from __future__ import annotations

MIL_HEADER = '''#!/usr/bin/env python3
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


def load_arrays(name):
    path = HERE / name
    if not path.is_file():
        return {{}}
    with np.load(path, allow_pickle=False) as data:
        return {{key: data[key] for key in data.files}}


CONSTANTS = load_arrays("constants.npz")


{build}
'''

TORCH_HEADER = """{header}

Symptom: {signature}

{what}
{needs}
Exit code: 0 the symptom reproduced, 1 it did not, 2 it cannot run here.
"""

#: what a minimized torch repro reads, and a factory's (its model and inputs inline)
TORCH_NEEDS_FILES = ("Needs numpy, torch and coremltools; reads weights.npz and inputs.npz "
                     "beside it.")
TORCH_NEEDS_INLINE = ("Needs numpy, torch and coremltools; reads no file: the model and its "
                      "inputs are below.")

TORCH_CONVERT_WHAT = (
    "Converts the module below with coremltools on both torch paths, as nebisect does —\n"
    "torch.export (+ run_decompositions({})) and jit.trace — and prints each converter's\n"
    "message (conversion runs on any OS)."
)

TORCH_PREDICT_WHAT = (
    "Converts the module below as nebisect does (torch.export first, jit.trace if that\n"
    "fails), predicts on Core ML with compute units {units} on macOS — elsewhere on\n"
    "nebisect's MIL simulator {sim} (a model of published device behaviour), used only if\n"
    "nebisect is importable — and compares with the module itself in float64."
)

SETTINGS = '''
EXPECTED = {signature!r}
TARGET = {target!r}
COMPUTE_UNITS = {units!r}
SIM_TARGET = {sim!r}
PRECISION = {precision!r}
OP_OF_INTEREST = {op_of_interest!r}
'''

NE_ATTRACT = '''

#: ne-attract (seed 000's topology, nebisect.fuzzing.builders): a graph whose only compute
#: op is the op of interest stays on the CPU on a device; fed through an identity 1x1
#: conv and read by a linear head it is routed to the Neural Engine. Both keep values
#: exactly (weight 1, no bias); the head only gives the graph its shape: not judged.
HEAD = "ne_attract_head"


def ne_attract_input(x):
    shape = list(x.shape)
    flat = mb.reshape(x=x, shape=[1, 1, 1, int(np.prod(shape))])
    weight = np.ones((1, 1, 1, 1), dtype=np.float16 if x.dtype == types.fp16 else np.float32)
    return mb.reshape(x=mb.conv(x=flat, weight=weight), shape=shape)


def ne_attract_head(y):
    if y.dtype not in (types.fp16, types.fp32) or any(not isinstance(d, int) for d in y.shape):
        return []
    size = int(np.prod(y.shape))
    weight = np.eye(min(size, 16), size,
                    dtype=np.float16 if y.dtype == types.fp16 else np.float32)
    return [mb.linear(x=mb.reshape(x=y, shape=[1, size]), weight=weight, name=HEAD)]


judge_every_output = judge


def judge(reference, outputs):
    """Judge the minimized program's outputs, not the wrapper's head."""
    return judge_every_output({k: v for k, v in reference.items() if k != HEAD},
                              {k: v for k, v in outputs.items() if k != HEAD})
'''

ON_DEVICE = '''

#: Compute-device classes the op of interest must run on, per compute units.
REQUIRED_DEVICES = {
    "CPU_AND_NE": ("MLNeuralEngineComputeDevice",),
    "CPU_AND_GPU": ("MLGPUComputeDevice",),
    "ALL": ("MLNeuralEngineComputeDevice", "MLGPUComputeDevice"),
}


def predict_on_device(model, feeds, units):
    """Compile, assert where the op of interest runs (MLComputePlan, as seed 000's repro
    does), then predict: a pass on CPU fallback is not a pass on the Neural Engine.
    Returns (outputs, "") or (None, (signature, detail)) when the op was not routed."""
    import os
    import tempfile

    from coremltools.models import CompiledMLModel
    from coremltools.models.utils import compile_model

    compute_units = getattr(ct.ComputeUnit, units)
    with tempfile.TemporaryDirectory() as scratch:
        package = os.path.join(scratch, "model.mlpackage")
        model.save(package)
        compiled = compile_model(package, os.path.join(scratch, "model.mlmodelc"))
        unrouted = check_placement(compiled, compute_units, units)
        if unrouted:
            return None, unrouted
        loaded = CompiledMLModel(compiled, compute_units=compute_units)
        return {name: np.asarray(value) for name, value in loaded.predict(feeds).items()}, ""


def check_placement(compiled, compute_units, units):
    from coremltools.models import compute_device
    from coremltools.models.compute_plan import MLComputePlan

    wanted = tuple(getattr(compute_device, n) for n in REQUIRED_DEVICES.get(units, ()))
    if not OP_OF_INTEREST or not wanted:
        return ""
    plan = MLComputePlan.load_from_path(compiled, compute_units=compute_units)
    ops = [op for function in plan.model_structure.program.functions.values()
           for op in walk(function.block)
           if op.operator_name.split(".", 1)[-1] == OP_OF_INTEREST]
    signature = f"unrouted:{OP_OF_INTEREST}"
    if not ops:
        return signature, f"no {OP_OF_INTEREST} in the compiled program"
    for op in ops:
        usage = plan.get_compute_device_usage_for_mlprogram_operation(op)
        device = usage.preferred_compute_device if usage is not None else None
        if not isinstance(device, wanted):
            return signature, (f"{OP_OF_INTEREST} runs on {type(device).__name__}, not on "
                               f"{' / '.join(REQUIRED_DEVICES[units])}")
    return ""


def walk(block):
    for op in block.operations:
        for nested in op.blocks:
            yield from walk(nested)
        yield op
'''

ORACLE = '''

def predict_simulator(program, inputs, target):
    from nebisect.targets.registry import get_target

    return get_target(target).predict(program, inputs).outputs


def simulator_missing():
    if platform.system() == "Darwin":
        return False
    try:
        import nebisect.targets  # noqa: F401
    except ImportError:
        print("Core ML cannot predict on this OS and nebisect's simulator is not "
              "installed: run this on macOS.")
        return True
    return False


def judge(reference, outputs):
    """nebisect's oracle when importable; else a plain fp16/fp32 ULP check."""
    try:
        from nebisect.oracle import judge as nebisect_judge
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
            return "mismatch:shape", f"{name}: shape {out.shape} vs {ref.shape}"
        exact = np.asarray(reference[name])
        if exact.dtype.kind in "iub":  # integers and bools: equal, or wrong
            got = np.asarray(outputs[name])
            got = got.astype(np.int64) if got.dtype.kind in "iub" else out
            bad = got != exact.astype(np.int64)
            if bad.any():
                at = np.unravel_index(int(np.flatnonzero(bad)[0]), ref.shape)
                return ("mismatch:integer", f"{name}{[int(i) for i in at]}: output {got[at]} "
                        f"vs reference {exact[at]}")
            continue
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
                return (f"mismatch:{kind}", f"{name}{list(at)}: output {out[at]:.6g} "
                        f"vs reference {ref[at]:.6g}")
    return "pass", ""


def error_signature(exc):
    message = f"{type(exc).__name__}: {exc}"
    try:
        from nebisect.verdict import error_signature as nebisect_signature
    except ImportError:
        return "error:predict:" + message.splitlines()[0], message
    return nebisect_signature("predict", message), message


def report(observed, detail, expected):
    print(f"observed: {observed}")
    if detail:
        print(f"          {detail}")
    print(f"expected: {expected}")
    reproduced = observed == expected
    print("REPRODUCED" if reproduced else "NOT REPRODUCED")
    return 0 if reproduced else 1
'''

MIL_MAIN = '''

def predict_coreml(program, inputs, units):
    model = ct.convert(
        program, convert_to="mlprogram", compute_precision=ct.precision.FLOAT32,
        pass_pipeline=ct.PassPipeline.EMPTY, minimum_deployment_target=ct.target.{opset},
        skip_model_load=True,
    )
    return predict_on_device(model, inputs, units)


def main():
    if simulator_missing():
        return 2
    inputs = load_arrays("inputs.npz")
    if platform.system() == "Darwin":
        print(f"running on Core ML, compute units {{COMPUTE_UNITS}}")
        run = lambda: predict_coreml(build_program(), inputs, COMPUTE_UNITS)  # noqa: E731
    else:
        print(f"running on nebisect's simulator {{SIM_TARGET}} (Core ML cannot predict here)")
        run = lambda: (predict_simulator(build_program(), inputs, SIM_TARGET), "")  # noqa: E731
    try:
        outputs, unrouted = run()
    except Exception as exc:
        observed, detail = error_signature(exc)
    else:
        if unrouted:
            observed, detail = unrouted
        else:
            try:
                reference = predict_simulator(build_program(), inputs, "sim:fp64")
            except ImportError:
                reference, _ = predict_coreml(build_program(), inputs, "CPU_ONLY")
            observed, detail = judge(reference, outputs)
    return report(observed, detail, EXPECTED)


if __name__ == "__main__":
    sys.exit(main())
'''

TORCH_CONVERSION = '''

# --------------------------------------------------------------------------- repro
import platform  # noqa: E402
import sys  # noqa: E402

import coremltools as ct  # noqa: E402

SETUP = {setup!r}  # converter fixes that were active (nebisect module:function)
PATHS = {paths!r}  # the conversion paths, in the order they are tried


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


def run_module(module, inputs):
    """forward's outputs by name: ``output``, or ``output_0``, ``output_1``, …"""
    with torch.no_grad():
        result = module(**inputs)
    if isinstance(result, torch.Tensor):
        return {{"output": result.numpy()}}
    return {{f"output_{{i}}": value.numpy() for i, value in enumerate(result)}}


def options(module, inputs, units):
    # Compiled and loaded on the device by predict_on_device, not by the converter.
    extra = {{"skip_model_load": True}} if units else {{}}
    return {{
        "convert_to": "mlprogram",
        "compute_precision": (ct.precision.FLOAT16 if PRECISION == "fp16"
                              else ct.precision.FLOAT32),
        "minimum_deployment_target": ct.target.iOS18,
        "outputs": [ct.TensorType(name=name) for name in run_module(module, inputs)],
        **extra,
    }}


def via_export(module, inputs, units=None):
    dims = {{}}
    for axes in DYNAMIC_DIMS.values():
        for bounds in axes.values():
            dims.setdefault(tuple(bounds), torch.export.Dim(f"dim{{len(dims)}}",
                                                            min=bounds[0], max=bounds[1]))
    dynamic = {{name: ({{a: dims[tuple(b)] for a, b in DYNAMIC_DIMS[name].items()}}
                       if name in DYNAMIC_DIMS else None) for name in inputs}}
    program = torch.export.export(module, tuple(inputs.values()),
                                  dynamic_shapes=dynamic if DYNAMIC_DIMS else None)
    return ct.convert(program.run_decompositions({{}}), inputs=input_types(inputs, False),
                      **options(module, inputs, units))


def via_trace(module, inputs, units=None):
    traced = torch.jit.trace(module, tuple(inputs.values()))
    return ct.convert(traced, inputs=input_types(inputs, True), **options(module, inputs, units))


CONVERTERS = {{"export": ("torch.export", via_export), "trace": ("jit.trace", via_trace)}}


def converters():
    """(label, convert) of each path of PATHS."""
    return [CONVERTERS[path] for path in PATHS]


def first_line(exc):
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    return f"{{type(exc).__name__}}: {{lines[0] if lines else '(no message)'}}"


def run_setup():
    import importlib

    for reference in SETUP:
        module_name, _, function = reference.partition(":")
        getattr(importlib.import_module(module_name), function)()
'''

TORCH_LOAD_MINIMIZED = '''

def load_module():
    run_setup()
    arrays = load_arrays("inputs.npz")
    inputs = {name: torch.from_numpy(arrays[name]) for name in INPUT_NAMES}
    return Minimized(load_arrays("weights.npz")).eval(), inputs
'''

#: before a factory's file: the seeds nebisect sets before importing it and again before
#: calling the factory (:data:`nebisect.sources.torch_module.FACTORY_SEED`)
FACTORY_SEEDING = '''


def seed_everything(seed={seed}):
    """The seeds nebisect sets before importing the factory's file and again before
    calling the factory: the weights are the ones the run judged."""
    import random

    import numpy
    import torch

    random.seed(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)


seed_everything()

'''

#: a factory's repro: the factory file comes first, then its trigger inputs
#: (``{inputs}``: the body of ``trigger_inputs``) and how the module is built from it
FACTORY_INPUTS = '''

# --------------------------------------------------------------------------- inputs
import numpy as np  # noqa: E402
import torch  # noqa: E402

INPUT_NAMES = {names!r}
DYNAMIC_DIMS = {{}}  # the factory's dynamic_dims, read by load_module


def trigger_inputs():
    """{what}"""
{inputs}
'''

TORCH_LOAD_FACTORY = '''

def load_module():
    run_setup()
    seed_everything()
    built = {factory}()
    for name, axes in built.get("dynamic_dims", {{}}).items():
        DYNAMIC_DIMS[name] = {{int(axis): tuple(bounds) for axis, bounds in axes.items()}}
    arrays = trigger_inputs()
    inputs = {{name: torch.from_numpy(np.ascontiguousarray(arrays[name]))
              for name in INPUT_NAMES}}
    return built["module"].eval(), inputs
'''

#: ``trigger_inputs``' body for inputs too large to inline: the factory's example
EXAMPLE_INPUTS = '''    seed_everything()
    example = {factory}()["example_inputs"]
    if not isinstance(example, dict):
        example = dict(zip(INPUT_NAMES, example))
    return {{name: np.asarray(value) for name, value in example.items()}}'''

TORCH_CONVERT_MAIN = '''
EXPECTED = {signature!r}
EXPECTED_MESSAGE = {message!r}
PRECISION = {precision!r}  # the target's: fp16 targets get a FLOAT16 program


def main():
    module, inputs = load_module()
    results = []
    for label, convert in converters():
        try:
            convert(module, inputs)
        except Exception as exc:
            results.append((label, first_line(exc)))
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
        observed, expected = (error_signature("convert", summary) if failed else "pass"), EXPECTED
    print(f"observed: {{observed}}")
    print(f"expected: {{expected}}")
    reproduced = observed == expected
    print("REPRODUCED" if reproduced else "NOT REPRODUCED")
    return 0 if reproduced else 1


if __name__ == "__main__":
    sys.exit(main())
'''

TORCH_PREDICT_MAIN = '''

def convert_first(module, inputs, units):
    """The package nebisect predicts with: the first path of PATHS that converts."""
    failures = []
    for label, convert in converters():
        try:
            return convert(module, inputs, units)
        except Exception as exc:
            failures.append(f"{{label}}: {{first_line(exc)}}")
    raise RuntimeError("conversion failed: " + " | ".join(failures))


def main():
    if simulator_missing():
        return 2
    module, inputs = load_module()
    feeds = {{name: value.numpy().astype(np.float32 if value.dtype.is_floating_point
                                       else np.int32) for name, value in inputs.items()}}
    darwin = platform.system() == "Darwin"
    model = convert_first(module, inputs, COMPUTE_UNITS if darwin else None)
    if darwin:
        print(f"running on Core ML, compute units {{COMPUTE_UNITS}}")
    else:
        print(f"running on nebisect's simulator {{SIM_TARGET}} (Core ML cannot predict here)")
    unrouted = ""
    try:
        if darwin:
            outputs, unrouted = predict_on_device(model, feeds, COMPUTE_UNITS)
        else:
            outputs = predict_simulator(model._mil_program, feeds, SIM_TARGET)
    except Exception as exc:
        observed, detail = error_signature(exc)
    else:
        exact = {{name: value.double() if value.dtype.is_floating_point else value
                 for name, value in inputs.items()}}
        reference = run_module(module.double(), exact)
        observed, detail = unrouted or judge(reference, outputs)
    return report(observed, detail, EXPECTED)


if __name__ == "__main__":
    sys.exit(main())
'''

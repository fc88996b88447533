"""Where Core ML will run each op: read an ``MLComputePlan`` the way Core ML builds it.

The plan's structure is coremltools' (``coremltools.models.compute_plan``): a program
of functions, each a block of operations, an operation with ``operator_name``,
``outputs`` and nested ``blocks`` (the branches of ``cond``, the body of
``while_loop``). Three rules, each from a defect found against coremltools 9.0:

* an op for which the plan gives **no device usage** (``const`` and friends: the
  binding returns None when Core ML has none) is not placed anywhere — recording it as
  ``unknown`` made a correct fix look like "placement moved off ne" (coremltools' own
  tests skip ``const`` before asserting a device);
* ops inside nested blocks are placed too (a recursive walk);
* a device is classified by the class coremltools built for it
  (``MLNeuralEngineComputeDevice`` …), not by a class name that a subclass or a
  remote proxy would not share.

Nothing here touches Core ML itself: the functions take a plan object, so recorded
plans built from the same classes test them on any platform.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def device_name(device: Any) -> str:
    """``ne``, ``gpu`` or ``cpu`` for a coremltools compute device ('unknown' otherwise)."""
    from coremltools.models.compute_device import (
        MLCPUComputeDevice,
        MLGPUComputeDevice,
        MLNeuralEngineComputeDevice,
    )

    for cls, name in ((MLNeuralEngineComputeDevice, "ne"), (MLGPUComputeDevice, "gpu"),
                      (MLCPUComputeDevice, "cpu")):
        if isinstance(device, cls):
            return name
    return "unknown"


def op_kind(operator_name: str) -> str:
    """``ios18.reduce_log_sum_exp`` → ``reduce_log_sum_exp`` (the opset prefix dropped)."""
    return operator_name.split(".", 1)[-1]


def plan_placement(plan: Any) -> tuple[dict[str, str], dict[str, str]]:
    """(op → device, op → op type) from an ``MLComputePlan``; ops are named by their
    first output. Every op appears in the op types; only ops with a device usage are
    placed."""
    program = plan.model_structure.program
    placement: dict[str, str] = {}
    op_types: dict[str, str] = {}
    if program is None:
        return placement, op_types
    for function in program.functions.values():
        for op in _operations(function.block):
            if not op.outputs:
                continue
            name = op.outputs[0].name
            op_types[name] = op_kind(op.operator_name)
            usage = plan.get_compute_device_usage_for_mlprogram_operation(op)
            if usage is not None:
                placement[name] = device_name(usage.preferred_compute_device)
    return placement, op_types


def _operations(block: Any) -> Iterable[Any]:
    """Every operation of ``block``, nested blocks' operations before their owner."""
    for op in block.operations:
        for nested in op.blocks:
            yield from _operations(nested)
        yield op


def missing_device(variant: str, devices: Iterable[Any]) -> str:
    """Why ``coreml:<variant>`` cannot run here given Core ML's available devices.

    ``ne`` needs a Neural Engine and ``gpu`` a GPU among
    ``MLModel.get_available_compute_devices()`` — a virtual machine (GitHub's hosted
    macOS runners) has neither, and Core ML then silently runs everything on the CPU.
    """
    wanted = {"ne": "a Neural Engine", "gpu": "a GPU"}.get(variant)
    if wanted is None:
        return ""
    names = sorted({device_name(d) for d in devices})
    if variant in names:
        return ""
    return (f"Core ML lists no {wanted.split(' ', 1)[1]} here (available compute devices: "
            f"{', '.join(names) or 'none'}; a virtual machine has none)")

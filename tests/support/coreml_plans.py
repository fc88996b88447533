"""Recorded Core ML compute plans, built from coremltools' own classes.

Core ML cannot produce a plan off macOS, so these tests record one: the structure is
made of coremltools' real dataclasses (``MLModelStructureProgramOperation`` … from
``coremltools.models.compute_plan``), the devices are real instances of
``MLNeuralEngineComputeDevice`` & co. (created without the native proxy they wrap on a
Mac), and the plan is a real ``MLComputePlan`` whose ``__proxy__`` answers as the
coremlpython binding does: it looks the operation up by the operation's own
``__proxy__`` and returns None for an op Core ML gives no device usage (``const``).
"""

from __future__ import annotations

from typing import Any

from coremltools.models import compute_device, compute_plan

NE = object.__new__(compute_device.MLNeuralEngineComputeDevice)
GPU = object.__new__(compute_device.MLGPUComputeDevice)
CPU = object.__new__(compute_device.MLCPUComputeDevice)
DEVICES = {"ne": NE, "gpu": GPU, "cpu": CPU}


class RecordedPlanProxy:
    """Answers like ``_MLComputePlanProxy``: usage by the operation's ``__proxy__``."""

    def __init__(self, structure: compute_plan.MLModelStructure,
                 usages: dict[str, compute_plan.MLComputePlanDeviceUsage]) -> None:
        self.model_structure = structure
        self._usages = usages

    def get_compute_device_usage_for_mlprogram_operation(self, operation: Any) -> Any:
        return self._usages.get(operation.__proxy__)


def op(operator: str, output: str, device: str | None,
       blocks: list[compute_plan.MLModelStructureProgramBlock] | None = None
       ) -> tuple[compute_plan.MLModelStructureProgramOperation, str | None]:
    """One operation (its proxy is its output name) and the device it is recorded on."""
    value_type = compute_plan.MLModelStructureProgramValueType()
    outputs = [compute_plan.MLModelStructureProgramNamedValueType(output, value_type)]
    operation = compute_plan.MLModelStructureProgramOperation(
        inputs={}, operator_name=operator, outputs=outputs, blocks=blocks or [],
        __proxy__=output)
    return operation, device


def block(*ops: tuple[compute_plan.MLModelStructureProgramOperation, str | None]
          ) -> compute_plan.MLModelStructureProgramBlock:
    return compute_plan.MLModelStructureProgramBlock(
        inputs=[], operations=[o for o, _ in ops], output_names=[])


def recorded_plan(*ops: tuple[compute_plan.MLModelStructureProgramOperation, str | None],
                  nested: dict[str, str | None] | None = None) -> compute_plan.MLComputePlan:
    """A plan of one ``main`` function over ``ops``; ``nested`` records devices of ops
    that live in nested blocks (by output name)."""
    devices = {o.__proxy__: d for o, d in ops} | (nested or {})
    usages = {
        name: compute_plan.MLComputePlanDeviceUsage(
            preferred_compute_device=DEVICES[d], supported_compute_devices=[DEVICES[d], CPU])
        for name, d in devices.items() if d is not None
    }
    function = compute_plan.MLModelStructureProgramFunction(inputs=[], block=block(*ops))
    structure = compute_plan.MLModelStructure(
        neuralnetwork=None, program=compute_plan.MLModelStructureProgram({"main": function}),
        pipeline=None)
    plan = object.__new__(compute_plan.MLComputePlan)
    plan.__proxy__ = RecordedPlanProxy(structure, usages)
    return plan

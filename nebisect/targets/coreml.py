"""Real Core ML targets (macOS only), written against coremltools' public API.

``coreml:cpu|gpu|ne|all`` map to ComputeUnit CPU_ONLY / CPU_AND_GPU / CPU_AND_NE / ALL.
Two lessons from the seeds shape this module:

* a stale compiled-model cache silently fakes a pass (seed 003), so compiled models
  live in nebisect's own cache **keyed by the package's content hash** and are compiled
  exactly once per hash (atomic rename; a half-compiled directory is never served);
* placement is asserted, not inferred (seeds 000 and 002): MLComputePlan gives the
  preferred device of every op, which the runner turns into ``unrouted``.

Forking after Core ML / Objective-C initialisation crashes the child (coremltools
#963, #1819), so these targets are not fork-safe and run in spawn mode.
"""

from __future__ import annotations

import os
import platform
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.case import NebisectError, sha256_path
from nebisect.files import keep_existing, staged
from nebisect.quiet import import_coremltools
from nebisect.targets import register_target
from nebisect.targets.base import Prediction, Target

_COMPUTE_UNITS = {"cpu": "CPU_ONLY", "gpu": "CPU_AND_GPU", "ne": "CPU_AND_NE", "all": "ALL"}
_DEVICE_NAMES = {
    "MLCPUComputeDevice": "cpu",
    "MLGPUComputeDevice": "gpu",
    "MLNeuralEngineComputeDevice": "ne",
}


def cache_dir() -> Path:
    """nebisect's compiled-model cache (``NEBISECT_CACHE`` overrides the location)."""
    root = os.environ.get("NEBISECT_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "nebisect"
    )
    return Path(root) / "compiled"


def compiled_path(package: Path) -> Path:
    """Compile ``package`` once per content hash and return the ``.mlmodelc`` path."""
    import_coremltools()
    from coremltools.models.utils import compile_model

    destination = cache_dir() / f"{sha256_path(package)}.mlmodelc"
    if destination.is_dir():
        return destination
    from nebisect.mil.load import loadable_package

    with staged(destination, keep_existing) as staging, loadable_package(package) as loadable:
        compile_model(str(loadable), str(staging))
    return destination


@register_target("coreml:cpu", "coreml:gpu", "coreml:ne", "coreml:all")
class CoreMLTarget(Target):
    """Apple Core ML on this Mac with the named compute units (CPU_ONLY … ALL)."""

    preload = ("numpy", "coremltools")
    fork_safe = False

    def availability(self) -> str | None:
        if platform.system() != "Darwin":
            return f"requires macOS and Core ML (this is {platform.system()})"
        try:
            import coremltools.libcoremlpython  # noqa: F401
        except ImportError as exc:
            return f"coremltools has no Core ML bindings here ({exc})"
        return None

    def predict(
        self, model: Any, inputs: dict[str, np.ndarray], *, intermediates: bool = False
    ) -> Prediction:
        ct = import_coremltools()
        from coremltools.models import CompiledMLModel

        units = getattr(ct.ComputeUnit, _COMPUTE_UNITS[self.spec.variant])
        compiled = compiled_path(self._package(model))
        loaded = CompiledMLModel(str(compiled), compute_units=units)
        outputs = loaded.predict({k: np.ascontiguousarray(v) for k, v in inputs.items()})
        placement, op_types = self._placement(compiled, units)
        return Prediction(
            outputs={k: np.asarray(v) for k, v in outputs.items()},
            placement=placement,
            op_types=op_types,
        )

    @staticmethod
    def _package(model: Any) -> Path:
        """The .mlpackage behind an artifact; builder programs are saved by content."""
        if model.kind == "mlpackage":
            return Path(model.location)
        if model.kind != "builder":
            raise NebisectError("a torch source must be converted before running on Core ML")
        from nebisect.mil.load import save_program

        packages = cache_dir().parent / "packages"
        packages.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=packages, prefix=".saving-") as scratch:
            saved = Path(scratch) / "model.mlpackage"
            save_program(model.program, saved)
            package = packages / f"{sha256_path(saved)}.mlpackage"
            with staged(package, keep_existing) as built:
                os.rename(saved, built)
        return package

    @staticmethod
    def _placement(compiled: Path, units: Any) -> tuple[dict[str, str], dict[str, str]]:
        """Preferred device of every op from MLComputePlan (op named by its first output)."""
        from coremltools.models.compute_plan import MLComputePlan

        plan = MLComputePlan.load_from_path(str(compiled), compute_units=units)
        program = plan.model_structure.program
        if program is None:
            return {}, {}
        placement: dict[str, str] = {}
        op_types: dict[str, str] = {}
        for function in program.functions.values():
            for op in function.block.operations:
                if not op.outputs:
                    continue
                name = op.outputs[0].name
                op_types[name] = op.operator_name.split(".", 1)[-1]
                usage = plan.get_compute_device_usage_for_mlprogram_operation(op)
                device = type(usage.preferred_compute_device).__name__ if usage else ""
                placement[name] = _DEVICE_NAMES.get(device, "unknown")
        return placement, op_types

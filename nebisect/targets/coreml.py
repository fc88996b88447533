"""Real Core ML targets (macOS only), written against coremltools 9.0's public API.

``coreml:cpu|gpu|ne|all`` map to ComputeUnit CPU_ONLY / CPU_AND_GPU / CPU_AND_NE / ALL.
One prediction goes through four stages, each marked so that a crash is blamed on the
right one: ``compile`` (package → ``.mlmodelc``), ``load`` (``CompiledMLModel``),
``plan`` (``MLComputePlan``: where each op will run) and ``predict``. Lessons from the
seeds and from reading coremltools' source shape it:

* a stale compiled-model cache silently fakes a pass (seed 003): compiled models live
  in nebisect's own cache under a key of the package's *content* (not its manifest's
  random identifiers), the macOS build and the coremltools version, compiled exactly
  once per key (atomic rename; a half-compiled directory is never served);
* placement is asserted, not inferred (seed 000): the compute plan gives each op's
  preferred device (:mod:`nebisect.targets.coreml_plan`); the runner fails closed on it
  (:mod:`nebisect.targets.placement`). A plan is unknown, never an error, where this
  macOS has none (before 14.4) or where it describes another input shape;
* a model this OS cannot load (a newer specification) is ``skipped`` with the reason;
* inputs are cast to what the model's description asks (:mod:`coreml_io`);
* intermediates (for bisection by first divergence) come from a fifth stage,
  ``inspect``: the program re-saved with every op's value as an extra output, as
  coremltools' ``MLModelInspector`` does (:mod:`nebisect.targets.coreml_inspect`), and
  are used only when that clone computes the same outputs as the original.

Forking after Core ML / Objective-C initialisation aborts the child (coremltools #963,
#1819): the isolator refuses fork mode on macOS altogether (:mod:`nebisect.isolation`).
"""

from __future__ import annotations

import os
import platform
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.arrays import sha256_path
from nebisect.errors import NebisectError
from nebisect.files import keep_existing, staged
from nebisect.isolate import Needs
from nebisect.isolation.job import mark_stage
from nebisect.mil.load import read_spec
from nebisect.mil.quiet import import_coremltools
from nebisect.sources.deployment import (
    compile_cache_key,
    macos_release,
    newer_os_needed,
    running_os_build,
    version_tuple,
)
from nebisect.targets.base import Prediction, Target, TargetSkipped
from nebisect.targets.coreml_inspect import save_with_outputs, trusted_intermediates
from nebisect.targets.coreml_io import (
    CoreMLInput,
    cast_inputs,
    describe_inputs,
    shape_scope,
)
from nebisect.targets.coreml_plan import missing_device, plan_placement
from nebisect.targets.registry import register_target

_COMPUTE_UNITS = {"cpu": "CPU_ONLY", "gpu": "CPU_AND_GPU", "ne": "CPU_AND_NE", "all": "ALL"}
#: MLComputePlan and MLModelStructure exist from macOS 14.4 (coremlpython bindings).
PLAN_MACOS = (14, 4)


def cache_dir() -> Path:
    """nebisect's compiled-model cache (``NEBISECT_CACHE`` overrides the location)."""
    root = os.environ.get("NEBISECT_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "nebisect"
    )
    return Path(root) / "compiled"


def compiled_path(package: Path) -> Path:
    """Compile ``package`` once per cache key and return the ``.mlmodelc`` path."""
    ct = import_coremltools()
    from coremltools.models.utils import compile_model

    key = compile_cache_key(sha256_path(package), running_os_build(), ct.__version__)
    destination = cache_dir() / f"{key}.mlmodelc"
    if destination.is_dir():
        return destination
    from nebisect.mil.load import loadable_package

    with staged(destination, keep_existing) as staging, loadable_package(package) as loadable:
        compile_model(str(loadable), str(staging))
    return destination


def plan_unavailable(release: tuple[str, str] | None) -> str:
    """Why this macOS offers no compute plan ('' when it does)."""
    if release is None or version_tuple(release[0]) >= PLAN_MACOS:
        return ""
    return (f"MLComputePlan needs macOS {'.'.join(map(str, PLAN_MACOS))} or newer "
            f"(this is {release[0]})")


@contextmanager
def inspected(package: Path) -> Iterator[tuple[Path, list[str]]]:
    """(the compiled clone of ``package`` that also outputs every inspectable value, the
    names added); the clone's package lives only inside the block, its compilation in
    the content-keyed cache."""
    scratch_root = cache_dir().parent / "packages"
    scratch_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch_root, prefix=".inspect-") as scratch:
        clone = Path(scratch) / "inspected.mlpackage"
        names = save_with_outputs(package, clone)
        yield compiled_path(clone), names


def package_of(model: Any) -> Path:
    """The .mlpackage behind an artifact; builder programs, and a function of a
    multifunction package, are saved by content (a function as the one-function program
    it is)."""
    if model.ref.is_package and not model.ref.function:
        return Path(model.location)
    if model.ref.is_torch:
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


@dataclass
class ReadyModel:
    """A model as Core ML will take it, on this Mac or on a device: its package and spec,
    what the spec asks of the inputs, the inputs cast accordingly (with a note per cast),
    and the ``ComputeUnit`` of the target's variant."""

    package: Path
    spec: Any
    described: dict[str, CoreMLInput]
    feeds: dict[str, np.ndarray]
    notes: list[str]
    units: Any

    @classmethod
    def of(cls, model: Any, inputs: dict[str, np.ndarray], variant: str) -> ReadyModel:
        ct = import_coremltools()
        package = package_of(model)
        spec = read_spec(package)
        described = describe_inputs(spec)
        feeds, notes = cast_inputs(inputs, described)
        return cls(package, spec, described, feeds, notes,
                   getattr(ct.ComputeUnit, _COMPUTE_UNITS[variant]))


@register_target("coreml:cpu", "coreml:gpu", "coreml:ne", "coreml:all")
class CoreMLTarget(Target):
    """Apple Core ML on this Mac with the named compute units (CPU_ONLY … ALL)."""

    needs = Needs(imports=("numpy", "coremltools"))

    def availability(self) -> str | None:
        if platform.system() != "Darwin":
            return f"requires macOS and Core ML (this is {platform.system()})"
        try:
            import coremltools.libcoremlpython  # noqa: F401
        except ImportError as exc:
            return f"coremltools has no Core ML bindings here ({exc})"
        ct = import_coremltools()
        try:
            devices = ct.models.MLModel.get_available_compute_devices()
        except (RuntimeError, ValueError):
            return None  # before macOS 14 Core ML does not list devices; placement says so
        return missing_device(self.spec.variant, devices) or None

    def predict(
        self, model: Any, inputs: dict[str, np.ndarray], *, intermediates: bool = False
    ) -> Prediction:
        from coremltools.libcoremlpython import _MLModelProxy
        from coremltools.models import CompiledMLModel

        ready = ReadyModel.of(model, inputs, self.spec.variant)
        too_new = newer_os_needed(ready.spec.specificationVersion,
                                  _MLModelProxy.maximum_supported_specification_version())
        if too_new:
            raise TargetSkipped(too_new)
        mark_stage("compile")
        compiled = compiled_path(ready.package)
        mark_stage("load")
        loaded = CompiledMLModel(str(compiled), compute_units=ready.units)
        mark_stage("plan")
        placement, op_types, unknown = self._placement(compiled, ready.units)
        mark_stage("predict")
        outputs = {k: np.asarray(v) for k, v in loaded.predict(ready.feeds).items()}
        middle: dict[str, np.ndarray] = {}
        notes = ready.notes
        if intermediates:
            mark_stage("inspect")
            with inspected(ready.package) as (clone, names):
                cloned = CompiledMLModel(str(clone), compute_units=ready.units).predict(ready.feeds)
            middle, dropped = trusted_intermediates(cloned, names, outputs)
            notes = [*notes, dropped] if dropped else notes
        return Prediction(
            outputs=outputs,
            placement=placement,
            op_types=op_types,
            intermediates=middle,
            placement_unknown=unknown or shape_scope(ready.feeds, ready.described),
            notes=notes,
        )

    @staticmethod
    def _placement(compiled: Path, units: Any) -> tuple[dict[str, str], dict[str, str], str]:
        """(placement, op types, why unknown) from this Mac's compute plan."""
        unknown = plan_unavailable(macos_release())
        if unknown:
            return {}, {}, unknown
        from coremltools.models.compute_plan import MLComputePlan

        try:
            plan = MLComputePlan.load_from_path(str(compiled), compute_units=units)
        except (RuntimeError, ValueError) as exc:
            return {}, {}, f"no compute plan ({exc})"
        placement, op_types = plan_placement(plan)
        return placement, op_types, ""

"""Core ML on a connected iPhone or iPad: ``coreml-remote:<device>:cpu|gpu|ne|all``.

Written against coremltools 9.0's experimental remote-device support
(``coremltools.models.ml_program.experimental.remote_device``): devices are listed with
``xcrun devicectl list devices``; ``Device.prepare_for_model_debugging`` builds and
launches coremltools' ``modelrunner`` app on the device (Xcode, a signing team —
``NEBISECT_DEVELOPMENT_TEAM``); a model compiled on the Mac is then loaded, planned and
predicted on the device through that app (``_RemoteMLModelService``).

``<device>`` is a name, UDID or identifier as devicectl shows them; the registered
``coreml-remote:<device>:…`` (``nebisect targets`` lists these) takes the first
connected iPhone or iPad. Like every target, one case runs in one isolated child, so a
device-side failure is that case's verdict, never nebisect's crash; the stages are
``compile`` (on the Mac), ``connect``, ``load``, ``plan``, ``predict`` and ``inspect``.
What a failure means is decided from coremltools' error alone (:func:`device_failure`):

* the case never reached the device's Core ML (no device, devicectl or the app could
  not be reached, or a model of a newer specification than the device's iOS loads) —
  ``skipped`` with the reason: nothing was judged;
* the app stopped while it held the model — an ``error`` at that stage, "the model
  runner app stopped" (a device-side crash: its stack is in the device's logs);
* the app's Core ML answered with an error — an ``error`` at that stage with its
  message, model identifiers (fresh UUIDs per load) replaced so equal failures have
  equal signatures.

Placement comes from the device's compute plan (operations named by output, as the
local plan), op types from the package's own spec; intermediates from the same clone
with extra outputs as on the Mac (:mod:`nebisect.targets.coreml_inspect`).
"""

from __future__ import annotations

import asyncio
import os
import platform
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.isolate import Needs
from nebisect.isolation.job import current_stage, mark_stage
from nebisect.sources.deployment import SPEC_RELEASES, newer_os_needed, version_tuple
from nebisect.targets.base import Prediction, Target, TargetSkipped
from nebisect.targets.coreml import ReadyModel, cache_dir, compiled_path, inspected
from nebisect.targets.coreml_inspect import trusted_intermediates
from nebisect.targets.coreml_io import shape_scope
from nebisect.targets.coreml_plan import op_kind
from nebisect.targets.registry import ANY_DEVICE, register_target
from nebisect.targets.spec import COREML_VARIANTS

#: Device kinds (coremltools' ``DeviceType`` values) a remote target runs on.
REMOTE_KINDS = ("iphone", "ipad")
NEEDS = "needs macOS with Xcode devicectl"
_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")


class RemoteDeviceError(Exception):
    """A failure of the model on the device: the case's ``error`` verdict at its stage."""


@dataclass(frozen=True)
class RemoteDevice:
    """What nebisect needs of a coremltools ``Device``: how to name it, what it is, and
    whether it is connected."""

    name: str
    udid: str
    identifier: str
    kind: str
    state: str
    os_version: str = ""

    @classmethod
    def of(cls, device: Any) -> RemoteDevice:
        return cls(device.name, device.udid, device.identifier, device.type.value,
                   device.state.value, device.os_version)

    @property
    def loadable_spec(self) -> int:
        """The newest Core ML specification this device's iOS/iPadOS loads (the iOS side
        of :data:`~nebisect.sources.deployment.SPEC_RELEASES`)."""
        major = (version_tuple(self.os_version) or (0,))[0]
        return max((spec for spec, releases in SPEC_RELEASES.items()
                    if major >= int(releases.split("/")[0].removeprefix("iOS"))), default=4)

    def answers_to(self, wanted: str) -> bool:
        return wanted.casefold() in {self.name.casefold(), self.udid.casefold(),
                                     self.identifier.casefold()}


def select_device(wanted: str, devices: Iterable[RemoteDevice]) -> tuple[RemoteDevice | None,
                                                                          str]:
    """(the device ``wanted`` names, '') or (None, why there is none)."""
    listed = list(devices)
    connected = [d for d in listed if d.kind in REMOTE_KINDS and d.state == "connected"]
    if wanted == ANY_DEVICE:
        if connected:
            return connected[0], ""
        return None, ("no connected device (an iPhone or iPad, paired, in Developer Mode, "
                      "that `xcrun devicectl list devices` shows connected)")
    named = [d for d in listed if d.answers_to(wanted)]
    if not named:
        shown = ", ".join(d.name for d in connected) or "none"
        return None, f"no connected device {wanted!r} (connected: {shown})"
    device = named[0]
    if device.kind not in REMOTE_KINDS:
        return None, f"{wanted!r} is a {device.kind}, not an iPhone or iPad"
    if device.state != "connected":
        return None, f"device {wanted!r} is {device.state}, not connected"
    return device, ""


def remote_unavailable(system: str, devicectl: str | None,
                       devices: Callable[[], list[RemoteDevice]], wanted: str) -> str:
    """Why ``coreml-remote:<wanted>:…`` cannot run here ('' when it can); ``devices``
    is asked only on a Mac with devicectl."""
    if system != "Darwin":
        return f"{NEEDS} (this is {system})"
    if devicectl is None:
        return f"{NEEDS} (devicectl is not on PATH: install Xcode 15 or newer)"
    return select_device(wanted, devices())[1]


@dataclass(frozen=True)
class DeviceFailure:
    """One error coremltools raised while talking to the device: the stage it happened
    in, the JSON-RPC / devicectl error code, the message, and whether the app's session
    was still alive afterwards."""

    stage: str
    code: int | None
    message: str
    session_alive: bool


def device_failure(failure: DeviceFailure, device: str) -> Exception:
    """The exception that turns ``failure`` into the case's verdict (see module doc)."""
    message = _UUID.sub("<id>", failure.message).strip()
    if failure.stage == "connect":
        return TargetSkipped(f"could not reach {device}: {message}")
    if not failure.session_alive:
        return RemoteDeviceError(f"the model runner app on the device stopped during "
                                 f"{failure.stage} (a device-side crash; see the device's "
                                 "crash logs in Xcode)")
    if failure.code is None:
        return TargetSkipped(f"lost {device} during {failure.stage}: {message}")
    return RemoteDeviceError(f"device Core ML failed at {failure.stage} "
                             f"(code {failure.code}): {message}")


def remote_placement(plan: Any) -> dict[str, str]:
    """op (first output name) → ``ne``/``gpu``/``cpu`` from a device's ``ComputePlan``."""
    from coremltools.models.ml_program.experimental.remote_device import ComputePlan

    kinds = ((ComputePlan.NeuralEngineDevice, "ne"), (ComputePlan.GPUDevice, "gpu"),
             (ComputePlan.CPUDevice, "cpu"))
    placement = {}
    for path, info in (plan.infos if plan is not None else {}).items():
        last = path.components[-1] if path.components else None
        name = getattr(last, "output_name", "")
        if name:
            preferred = info.device_usage.preferred
            placement[name] = next((k for cls, k in kinds if isinstance(preferred, cls)),
                                   "unknown")
    return placement


def program_op_types(spec: Any) -> dict[str, str]:
    """op (first output name) → op type, for every op of the spec's main function,
    nested blocks included."""
    function = spec.mlProgram.functions["main"]
    types: dict[str, str] = {}
    pending = [function.block_specializations[function.opset]]
    while pending:
        block = pending.pop()
        for op in block.operations:
            pending.extend(op.blocks)
            if op.outputs:
                types[op.outputs[0].name] = op_kind(op.type)
    return types


def _list_devices() -> list[RemoteDevice]:
    from coremltools.models.ml_program.experimental.remote_device import Device

    return [RemoteDevice.of(d) for d in Device.get_devices()]


@register_target(*(f"coreml-remote:{ANY_DEVICE}:{units}" for units in COREML_VARIANTS))
class CoreMLRemoteTarget(Target):
    """Core ML on a connected iPhone or iPad (coremltools' experimental remote device)."""

    needs = Needs(imports=("numpy", "coremltools"))

    def availability(self) -> str | None:
        return remote_unavailable(platform.system(), shutil.which("devicectl"),
                                  _list_devices, self.spec.device) or None

    def predict(
        self, model: Any, inputs: dict[str, np.ndarray], *, intermediates: bool = False
    ) -> Prediction:
        from coremltools.models.ml_program.experimental.remote_device import _DeviceCtlError

        ready = ReadyModel.of(model, inputs, self.spec.variant)
        mark_stage("compile")
        compiled = compiled_path(ready.package)
        session = _Session(self.spec.device, ready.units, ready.spec.specificationVersion)
        try:
            prediction = asyncio.run(session.predict(ready.package, compiled, ready.feeds,
                                                     intermediates))
        except _DeviceCtlError as exc:
            raise device_failure(DeviceFailure(current_stage(), exc.error_code,
                                               _text(exc.message), session.alive()),
                                 self.spec.device) from exc
        prediction.op_types = program_op_types(ready.spec)
        prediction.placement_unknown = shape_scope(ready.feeds, ready.described)
        prediction.notes = [*ready.notes, *prediction.notes]
        return prediction


class _Session:
    """The device, prepared once per child, and one load → plan → predict per model."""

    def __init__(self, wanted: str, units: Any, spec_version: int) -> None:
        self.wanted = wanted
        self.units = units
        self.spec_version = spec_version
        self.device: Any = None

    def alive(self) -> bool:
        session = getattr(self.device, "session", None)
        return bool(session is not None and session.is_alive)

    async def predict(self, package: Path, compiled: Path, feeds: dict[str, np.ndarray],
                      intermediates: bool) -> Prediction:
        """The model's prediction and placement; with ``intermediates``, every value from
        a second run of its clone with extra outputs (when that clone is faithful)."""
        prediction = await self.load_and_predict(compiled, feeds)
        if intermediates:
            mark_stage("inspect")
            with inspected(package) as (clone, names):
                cloned = (await self.load_and_predict(clone, feeds)).outputs
            prediction.intermediates, dropped = trusted_intermediates(cloned, names,
                                                                      prediction.outputs)
            prediction.notes = [dropped] if dropped else []
        return prediction

    async def load_and_predict(self, compiled: Path,
                               feeds: dict[str, np.ndarray]) -> Prediction:
        """Load ``compiled`` on the device (connecting first), read its compute plan,
        predict ``feeds`` once and unload it: the outputs and each op's placement."""
        from coremltools.models.ml_program.experimental.remote_device import (
            _RemoteMLModelService,
        )

        if self.device is None:
            self.device = await self._connect()
        mark_stage("load")
        service = await _RemoteMLModelService.load_on_device(self.device, compiled, self.units)
        mark_stage("plan")
        placement = remote_placement(await service.retrieve_compute_plan())
        mark_stage("predict")
        outputs = await service.predict(feeds)
        await service.unload()
        return Prediction({k: np.asarray(v) for k, v in outputs.items()}, placement=placement)

    async def _connect(self) -> Any:
        from coremltools.models.ml_program.experimental.remote_device import (
            AppSigningCredentials,
            Device,
        )

        mark_stage("connect")
        devices = Device.get_devices()
        chosen, why = select_device(self.wanted, [RemoteDevice.of(d) for d in devices])
        if chosen is None:
            raise TargetSkipped(why)
        too_new = newer_os_needed(self.spec_version, chosen.loadable_spec)
        if too_new:
            raise TargetSkipped(f"{chosen.name} (iOS {chosen.os_version}): {too_new}")
        device = next(d for d in devices if d.udid == chosen.udid)
        workdir = cache_dir().parent / "remote" / chosen.udid
        workdir.mkdir(parents=True, exist_ok=True)
        credentials = AppSigningCredentials(
            development_team=os.environ.get("NEBISECT_DEVELOPMENT_TEAM", ""),
            bundle_identifier=None, provisioning_profile_uuid=None)
        try:
            return await device.prepare_for_model_debugging(credentials=credentials,
                                                            working_directory=workdir)
        except (ValueError, RuntimeError, OSError) as exc:  # no Xcode, signing, app launch
            raise device_failure(DeviceFailure("connect", None, str(exc), False),
                                 self.wanted) from exc


def _text(message: Any) -> str:
    """devicectl puts its stderr (bytes) in the message; the app a string."""
    return message.decode(errors="replace") if isinstance(message, bytes) else str(message)

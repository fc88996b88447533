"""coreml-remote:<device>:<units> targets: grammar, listing, availability from an injected
platform and device list, and the verdicts recorded device errors become. A device
itself is needed only on macOS with a connected iPhone/iPad; nothing here needs one."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from coremltools.models.ml_program.experimental.remote_device import (
    ComputePlan,
    Device,
    DeviceState,
    DeviceType,
    _DeviceCtlError,
)
from support import REPO
from support.bisect_programs import chain

from nebisect.case import Case, SourceRef
from nebisect.isolation.child import exception_verdict
from nebisect.isolation.job import mark_stage
from nebisect.targets.base import TargetSkipped
from nebisect.targets.coreml_remote import (
    CoreMLRemoteTarget,
    DeviceFailure,
    RemoteDevice,
    RemoteDeviceError,
    device_failure,
    program_op_types,
    remote_placement,
    remote_unavailable,
    select_device,
)
from nebisect.targets.placement import required_devices
from nebisect.targets.registry import ANY_DEVICE, get_target
from nebisect.targets.spec import TargetSpec, TargetSpecError

#: Names the connected device the on-device test uses (e.g. the device job's variable).
REMOTE_VAR = "NEBISECT_REMOTE_DEVICE"


def device(name: str, kind: DeviceType = DeviceType.IPHONE,
           state: DeviceState = DeviceState.CONNECTED) -> RemoteDevice:
    """A coremltools ``Device`` as ``_DeviceCtl.get_devices`` builds it, then nebisect's."""
    return RemoteDevice.of(Device(
        name=name, type=kind, identifier=f"ID-{name}", udid=f"00008110-{name.upper()}",
        os_version="18.2", os_build_number="22C152", developer_mode_state="enabled",
        state=state, session=None))


def test_remote_grammar_round_trips_and_keeps_other_names() -> None:
    spec = TargetSpec.parse("coreml-remote:Jane's iPhone:ne")
    assert (spec.backend, spec.device, spec.variant) == ("coreml-remote", "Jane's iPhone", "ne")
    assert str(spec) == "coreml-remote:Jane's iPhone:ne" and spec.precision == "fp16"
    assert TargetSpec.parse("coreml-remote:ipad:cpu").precision == "fp32"
    for name in ("sim:fp16:spec", "coreml:ne", "torch:cpu:fp64"):
        assert str(TargetSpec.parse(name)) == name
    for bad in ("coreml-remote:ne", "coreml-remote: :ne", "coreml-remote:x:tpu",
                "coreml-remote:a:b:ne"):
        with pytest.raises(TargetSpecError, match="coreml-remote:<device>:"):
            TargetSpec.parse(bad)
    case = Case(SourceRef("mlpackage", "m.mlpackage"), "coreml-remote:ipad:ne")
    assert case.target.endswith(":ne")


def test_any_device_name_reaches_the_one_registration() -> None:
    target = get_target("coreml-remote:Jane's iPad:all")
    assert isinstance(target, CoreMLRemoteTarget) and target.spec.device == "Jane's iPad"
    assert required_devices(target.name) == ("ne", "gpu")
    assert required_devices("coreml-remote:x:cpu") == () == required_devices("sim:fp16")


@pytest.mark.skipif(platform.system() == "Darwin", reason="checks the reason given off macOS")
def test_targets_lists_remote_targets_with_the_reason() -> None:
    run = subprocess.run([sys.executable, "-m", "nebisect", "targets", "--json"],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    rows = {r["target"]: r for r in json.loads(run.stdout)}
    remote = sorted(n for n in rows if n.startswith("coreml-remote:"))
    assert remote == [f"coreml-remote:{ANY_DEVICE}:{u}" for u in ("all", "cpu", "gpu", "ne")]
    for name in remote:
        assert not rows[name]["available"]
        assert rows[name]["reason"] == "needs macOS with Xcode devicectl (this is Linux)"


def test_availability_from_platform_devicectl_and_devices() -> None:
    def never() -> list[RemoteDevice]:
        raise AssertionError("devices listed off a Mac with devicectl")

    assert remote_unavailable("Linux", "/usr/bin/devicectl", never, ANY_DEVICE) == (
        "needs macOS with Xcode devicectl (this is Linux)")
    assert "devicectl is not on PATH" in remote_unavailable("Darwin", None, never, ANY_DEVICE)
    assert remote_unavailable("Darwin", "/x/devicectl", list, ANY_DEVICE).startswith(
        "no connected device")
    phone, mac = device("phone"), device("studio", DeviceType.MAC)
    away = device("old", state=DeviceState.UNAVAILABLE)
    listed = [mac, away, phone]
    assert remote_unavailable("Darwin", "/x/devicectl", lambda: listed, ANY_DEVICE) == ""
    assert select_device(ANY_DEVICE, listed) == (phone, "")
    assert select_device("00008110-PHONE".lower(), listed) == (phone, "")
    assert select_device("ID-phone", listed) == (phone, "")
    assert select_device("old", listed)[1] == "device 'old' is unavailable, not connected"
    assert select_device("studio", listed)[1] == "'studio' is a mac, not an iPhone or iPad"
    assert select_device("tablet", listed)[1] == "no connected device 'tablet' (connected: phone)"


def test_a_device_loads_the_specifications_of_its_ios() -> None:
    assert device("phone").loadable_spec == 9  # iOS 18.2
    older = RemoteDevice("pad", "u", "i", "ipad", "connected", "17.5.1")
    assert older.loadable_spec == 8
    assert RemoteDevice("new", "u", "i", "iphone", "connected", "26.0").loadable_spec == 10
    assert RemoteDevice("odd", "u", "i", "iphone", "connected", "").loadable_spec == 4


def test_recorded_device_errors_become_verdicts() -> None:
    """Errors as coremltools raises them: devicectl's exit code and stderr, the model
    runner's JSON-RPC code and message (with the per-load model UUID in it)."""
    unreachable = _DeviceCtlError(error_code=1, message=b"ERROR: The device is locked.")
    skipped = device_failure(DeviceFailure("connect", unreachable.error_code,
                                           unreachable.message.decode(), False), "phone")
    assert isinstance(skipped, TargetSkipped)
    assert str(skipped) == "could not reach phone: ERROR: The device is locked."

    def refused(model_id: str) -> Exception:
        error = _DeviceCtlError(error_code=-32000, message=(
            f"Failed to load model {model_id}: Error Domain=com.apple.CoreML Code=0 "
            "\"Unable to compile model\""))
        return device_failure(DeviceFailure("load", error.error_code, error.message, True),
                              "phone")

    first = refused("0B7A3C52-1D1E-4C6B-9C1E-2A8F0E6C9D11")
    second = refused("E3F1A2B4-5C6D-4E7F-8A9B-0C1D2E3F4A5B")
    assert isinstance(first, RemoteDeviceError) and "code -32000" in str(first)
    mark_stage("load")
    one, two = exception_verdict(first), exception_verdict(second)
    assert (one.status, one.stage) == ("error", "load")
    assert one.signature == two.signature and "<id>" in one.message
    crashed = device_failure(DeviceFailure("predict", None, "socket closed", False), "phone")
    assert isinstance(crashed, RemoteDeviceError)
    assert str(crashed).startswith("the model runner app on the device stopped during predict")
    lost = device_failure(DeviceFailure("predict", None, "copy failed", True), "phone")
    assert isinstance(lost, TargetSkipped) and str(lost) == "lost phone during predict: copy failed"


def operation(name: str, preferred: dict[str, Any]) -> dict[str, Any]:
    return {"deviceUsage": {"preferred": preferred, "supported": [preferred, {"cpu": {}}]},
            "estimatedCost": 0.5,
            "path": {"components": [{"program": {}}, {"programFunction": {"data": {
                "name": "main"}}}, {"programBlock": {"data": {"index": -1}}},
                {"programOperation": {"data": {"outputName": name}}}]}}


def test_placement_from_a_recorded_device_plan(tmp_path: Path) -> None:
    from coremltools.models.utils import load_spec

    plan = ComputePlan.from_dict({"infos": [
        operation("lse", {"neuralEngine": {"totalCoreCount": 16}}),
        operation("step0", {"gpu": {}}), operation("step1", {"cpu": {}})]})
    assert remote_placement(plan) == {"lse": "ne", "step0": "gpu", "step1": "cpu"}
    assert remote_placement(None) == {}
    package, _ = chain(tmp_path, 5)
    types = program_op_types(load_spec(str(package)))
    assert types["lse"] == "reduce_log_sum_exp" and len(
        [t for t in types.values() if t != "const"]) == 5


@pytest.mark.macos
@pytest.mark.skipif(not os.environ.get(REMOTE_VAR),
                    reason=f"needs a connected iPhone/iPad named by {REMOTE_VAR} (macOS, Xcode "
                    "devicectl, Developer Mode, NEBISECT_DEVELOPMENT_TEAM for the runner app)")
def test_a_connected_device_predicts_places_and_records_intermediates(tmp_path: Path) -> None:
    from support.bisect_programs import lse_chain

    from nebisect.mil.interp import run_program
    from nebisect.mil.load import load_program
    from nebisect.sources.artifact import Artifact

    package, _ = chain(tmp_path, 5)
    feeds = {"x": lse_chain.chain_inputs()["x"] / 4}  # no overflow: every unit agrees
    target = get_target(f"coreml-remote:{os.environ[REMOTE_VAR]}:cpu")
    assert target.availability() is None
    got = target.predict(Artifact("mlpackage", str(package), {}), feeds, intermediates=True)
    expected = run_program(load_program(package), feeds, "fp32", intermediates=True)
    assert sorted(got.outputs) == sorted(expected.outputs)
    assert got.placement and set(got.placement.values()) == {"cpu"}
    assert set(got.intermediates) == set(expected.intermediates) - set(feeds)

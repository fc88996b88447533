"""The real Core ML path, proven where Linux can prove it (issue 14).

Each test names the defect it covers. Core ML itself runs in test_coreml_target.py
(macOS only); here run the decisions around it: content hashes, placement on recorded
compute plans of coremltools' own classes, OS and deployment choices, fork refusal,
input casts, device availability.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import SUPPORT
from support.coreml_plans import CPU, GPU, NE, block, op, recorded_plan

from nebisect.arrays import sha256_path
from nebisect.case import Case, CaseOptions, SourceRef
from nebisect.errors import NebisectError
from nebisect.evaluate.judge import _routed
from nebisect.sources.deployment import (
    compile_cache_key,
    deployment_for,
    macos_release,
    newer_os_needed,
)
from nebisect.targets.base import Prediction
from nebisect.targets.coreml import plan_unavailable
from nebisect.targets.coreml_io import cast_inputs, describe_inputs, shape_scope
from nebisect.targets.coreml_plan import missing_device, plan_placement
from nebisect.verdict import Verdict

NEBISECT = [sys.executable, "-m", "nebisect"]


def _program(weight: np.ndarray):  # type: ignore[no-untyped-def]
    from coremltools.converters.mil import Builder as mb

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, 8))])
    def prog(x):  # type: ignore[no-untyped-def]
        return mb.linear(x=x, weight=weight)

    return prog


def _save(path: Path, program: object) -> Path:
    from nebisect.mil.load import save_program

    save_program(program, path)
    return path


# ------------------------------------------------------------------ 1. content hash
def test_two_saves_of_one_program_hash_equal_and_one_weight_byte_differs(
        tmp_path: Path) -> None:
    program = _program(np.arange(128, dtype=np.float32).reshape(16, 8))
    first, second = _save(tmp_path / "a.mlpackage", program), _save(tmp_path / "b.mlpackage",
                                                                     program)
    assert (first / "Manifest.json").read_bytes() != (second / "Manifest.json").read_bytes()
    assert sha256_path(first) == sha256_path(second)
    blob = next(first.rglob("weight.bin"))
    data = bytearray(blob.read_bytes())
    data[-1] ^= 1
    blob.write_bytes(bytes(data))
    assert sha256_path(first) != sha256_path(second)


def test_manifest_meaning_still_counts(tmp_path: Path) -> None:
    package = _save(tmp_path / "a.mlpackage", _program(np.ones((16, 8), np.float32)))
    before = sha256_path(package)
    manifest = json.loads((package / "Manifest.json").read_text())
    weights = next(k for k, v in manifest["itemInfoEntries"].items() if v["name"] == "weights")
    manifest["rootModelIdentifier"] = weights
    (package / "Manifest.json").write_text(json.dumps(manifest))
    assert sha256_path(package) != before
    (package / "Manifest.json").write_text("not json")
    assert sha256_path(package) != before


def test_compile_cache_key_carries_os_build_and_coremltools() -> None:
    key = compile_cache_key("abc", "24B83", "9.0")
    assert key == compile_cache_key("abc", "24B83", "9.0")
    assert len({key, compile_cache_key("abc", "24C101", "9.0"),
                compile_cache_key("abc", "24B83", "9.1"),
                compile_cache_key("abd", "24B83", "9.0")}) == 4


# ------------------------------------------------------------ 3. consts, nested blocks
def test_plan_skips_ops_without_device_and_walks_nested_blocks() -> None:
    inner = block(op("ios18.exp", "exp_0", None), op("ios18.softplus", "sp_0", None))
    plan = recorded_plan(
        op("const", "w", None),
        op("ios18.conv", "conv_0", "ne"),
        op("cond", "cond_0", "cpu", blocks=[inner]),
        op("ios18.reduce_log_sum_exp", "lse_0", "ne"),
        nested={"exp_0": "ne", "sp_0": "gpu"},
    )
    placement, op_types = plan_placement(plan)
    assert placement == {"conv_0": "ne", "exp_0": "ne", "sp_0": "gpu", "cond_0": "cpu",
                         "lse_0": "ne"}
    assert op_types["w"] == "const" and op_types["lse_0"] == "reduce_log_sum_exp"
    assert op_types["sp_0"] == "softplus"


# ------------------------------------------------------------- 2. fail-closed routing
def _case(target: str, op_of_interest: str = "") -> Case:
    return Case(SourceRef("mlpackage", "m.mlpackage"), target,
                options=CaseOptions(op_of_interest=op_of_interest))


def _route(target: str, plan_ops: list, op_of_interest: str = "", status: str = "pass",
           unknown: str = "") -> Verdict:
    placement, op_types = plan_placement(recorded_plan(*plan_ops))
    prediction = Prediction({}, placement, op_types, placement_unknown=unknown)
    verdict = Verdict(status, "predict", "mismatch:collapse" if status == "mismatch" else "")
    return _routed(_case(target, op_of_interest), prediction, verdict)


LSE_ON_CPU = [op("const", "w", None), op("ios18.conv", "conv_0", "ne"),
              op("ios18.reduce_log_sum_exp", "lse_0", "cpu")]


def test_op_of_interest_on_cpu_is_unrouted_not_pass() -> None:
    verdict = _route("coreml:ne", LSE_ON_CPU, "reduce_log_sum_exp")
    assert (verdict.status, verdict.signature) == ("unrouted", "unrouted:reduce_log_sum_exp")
    assert verdict.message == "lse_0 (reduce_log_sum_exp) ran on cpu, not on ne"
    assert verdict.target_facts.routed == "1/2 compute ops on ne"


def test_missing_op_of_interest_is_unrouted_never_pass() -> None:
    verdict = _route("coreml:ne", LSE_ON_CPU, "softplus")
    assert verdict.status == "unrouted"
    assert "softplus is not in the program" in verdict.message


def test_every_compute_op_elsewhere_is_unrouted_without_op_of_interest() -> None:
    ops = [op("const", "w", None), op("ios18.conv", "c", "cpu"), op("ios18.add", "a", "cpu"),
           op("ios18.reshape", "r", "ne")]
    verdict = _route("coreml:ne", ops)
    assert (verdict.status, verdict.message) == (
        "unrouted", "every compute op (2) ran elsewhere than ne")
    mismatch = _route("coreml:gpu", ops, status="mismatch")
    assert mismatch.status == "unrouted" and mismatch.target_facts.judged == "mismatch:collapse"


def test_routed_pass_reports_counts_and_consts_do_not_count() -> None:
    ops = [op("const", "w", None), op("ios18.conv", "c", "ne"),
           op("ios18.reduce_log_sum_exp", "lse", "ne"), op("ios18.add", "a", "cpu")]
    verdict = _route("coreml:ne", ops, "reduce_log_sum_exp")
    assert verdict.status == "pass"
    assert verdict.target_facts.routed == "2/3 compute ops on ne"
    assert _route("coreml:all", [op("ios18.conv", "c", "gpu")]).status == "pass"
    assert _route("coreml:cpu", [op("ios18.conv", "c", "cpu")]).metrics == {}


def test_unknown_placement_turns_a_pass_into_skipped_and_keeps_failures() -> None:
    reason = plan_unavailable(("14.3.1", "23D60"))
    assert reason == "MLComputePlan needs macOS 14.4 or newer (this is 14.3.1)"
    assert plan_unavailable(("14.4", "23E214")) == "" and plan_unavailable(None) == ""
    verdict = _route("coreml:ne", [], unknown=reason)
    assert verdict.status == "skipped" and reason in verdict.message
    assert _route("coreml:ne", [], status="mismatch", unknown=reason).status == "mismatch"
    assert _route("coreml:ne", []).status == "skipped"  # a plan that placed nothing


# --------------------------------------------------------------------- 4. default shape
def _spec_with_flexible_input(kind: str):  # type: ignore[no-untyped-def]
    from coremltools.proto import FeatureTypes_pb2, Model_pb2

    spec = Model_pb2.Model()
    spec.specificationVersion = 9
    tokens = spec.description.input.add()
    tokens.name = "tokens"
    array = tokens.type.multiArrayType
    array.dataType = FeatureTypes_pb2.ArrayFeatureType.FLOAT32
    array.shape.extend([1, 8, 4])
    if kind == "range":
        for lo, hi in ((1, 1), (1, 382), (4, 4)):
            size = array.shapeRange.sizeRanges.add()
            size.lowerBound, size.upperBound = lo, hi
    else:
        for n in (8, 16):
            array.enumeratedShapes.shapes.add().shape.extend([1, n, 4])
    mask = spec.description.input.add()
    mask.name = "mask"
    mask.type.multiArrayType.dataType = FeatureTypes_pb2.ArrayFeatureType.INT32
    mask.type.multiArrayType.shape.extend([1, 8])
    return spec


def test_plan_describes_the_default_shape_only() -> None:
    described = describe_inputs(_spec_with_flexible_input("range"))
    at_default = {"tokens": np.zeros((1, 8, 4), np.float32)}
    assert shape_scope(at_default, described) == ""
    note = shape_scope({"tokens": np.zeros((1, 37, 4), np.float32)}, described)
    assert note.startswith("the compute plan describes the default shape: tokens 1×8×4 "
                           "(given 1×37×4).")
    assert "ct.EnumeratedShapes" in note
    enumerated = describe_inputs(_spec_with_flexible_input("enumerated"))
    note = shape_scope({"tokens": np.zeros((1, 16, 4), np.float32)}, enumerated)
    assert "default shape" in note and "EnumeratedShapes" not in note


# ------------------------------------------------------------------------ 9. dtypes
def test_integer_and_float64_inputs_cast_to_what_the_description_asks() -> None:
    described = describe_inputs(_spec_with_flexible_input("range"))
    feeds, notes = cast_inputs({"tokens": np.ones((1, 8, 4), np.float64),
                                "mask": np.ones((1, 8), np.int64)}, described)
    assert feeds["tokens"].dtype == np.float32 and feeds["mask"].dtype == np.int32
    assert notes == ["input tokens: cast float64 → float32 as the model's description asks",
                     "input mask: cast int64 → int32 as the model's description asks"]
    same, none = cast_inputs({"mask": np.ones((1, 8), np.int32)}, described)
    assert none == [] and same["mask"].dtype == np.int32
    with pytest.raises(NebisectError, match=r"input mask: values 0\.\.4294967296 do not fit"):
        cast_inputs({"mask": np.array([[0, 1 << 32]], np.int64)}, described)


def test_cast_notes_reach_the_verdict() -> None:
    prediction = Prediction({}, notes=["input mask: cast int64 → int32"])
    verdict = _routed(_case("coreml:cpu"), prediction, Verdict("pass"))
    assert verdict.target_facts.notes == ["input mask: cast int64 → int32"]


# ------------------------------------------------------------ 7. OS and deployment
def test_deployment_target_follows_the_running_macos() -> None:
    assert deployment_for(None) == "iOS18"
    assert deployment_for((13, 6)) == "macOS13"
    assert deployment_for((14, 7, 1)) == "macOS14"
    assert deployment_for((15, 1)) == deployment_for((26, 0)) == "iOS18"


def test_model_needing_a_newer_os_is_named() -> None:
    assert newer_os_needed(8, 8) == ""
    message = newer_os_needed(9, 8)
    assert message.startswith("model needs a newer OS: it is Core ML specification 9 "
                              "(iOS18/macOS15), this Core ML loads up to 8 (iOS17/macOS14)")


def test_macos_release_from_system_version_plist(tmp_path: Path) -> None:
    import plistlib

    plist = tmp_path / "SystemVersion.plist"
    plist.write_bytes(plistlib.dumps({"ProductVersion": "14.4.1",
                                      "ProductBuildVersion": "23E224"}))
    assert macos_release(plist) == ("14.4.1", "23E224")
    assert macos_release(tmp_path / "missing.plist") is None


def test_bad_deployment_target_is_a_one_line_usage_error() -> None:
    done = subprocess.run([*NEBISECT, "run", "examples/meanpool.py:model",
                           "--deployment-target", "iOS-latest"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == ("nebisect: error: --deployment-target 'iOS-latest': "
                                   "expected a coremltools target such as macOS14, macOS15 "
                                   "or iOS18")


# ---------------------------------------------------------------- 6. skip_model_load
class _Recorded(Exception):
    pass


def test_conversion_never_loads_the_model_on_core_ml(monkeypatch: pytest.MonkeyPatch) -> None:
    import coremltools as ct

    from nebisect.sources.convert import convert_source
    from nebisect.sources.torch_load import load_torch_source

    seen: list[dict] = []

    def recording_convert(model: object, **options: object) -> None:
        seen.append(options)
        raise _Recorded("recorded")

    monkeypatch.setattr(ct, "convert", recording_convert)
    models, attempts = convert_source(load_torch_source("examples/meanpool.py:model"), "fp16")
    assert models == {} and [a.path for a in attempts] == ["export", "trace"]
    assert [o.get("skip_model_load") for o in seen] == [True, True]


# ---------------------------------------------------------------------- 8. fork on macOS
def test_fork_is_refused_on_macos(monkeypatch: pytest.MonkeyPatch) -> None:
    from nebisect.isolation.isolator import Isolator, refused_mode

    assert refused_mode("fork", "linux") == "" and refused_mode("spawn", "darwin") == ""
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(NebisectError, match=r"isolation mode fork is refused on macOS: "
                       r"forking after coremltools has loaded Core ML aborts the child "
                       r"\(coremltools #963, #1819\)"):
        Isolator("fork")


# ------------------------------------------------------------------ 10. availability
def test_neural_engine_and_gpu_need_a_listed_device() -> None:
    assert missing_device("ne", [CPU, GPU, NE]) == ""
    assert missing_device("gpu", [CPU, GPU]) == ""
    assert missing_device("cpu", []) == "" and missing_device("all", [CPU]) == ""
    assert missing_device("ne", [CPU]) == (
        "Core ML lists no Neural Engine here (available compute devices: cpu; a virtual "
        "machine has none)")
    assert "no GPU here (available compute devices: none" in missing_device("gpu", [])


def test_model_needing_a_newer_os_is_a_skipped_verdict(tmp_path: Path) -> None:
    """A target that cannot load the model here (TargetSkipped) gives ``skipped`` with
    the reason, never an error blamed on the device."""
    from nebisect.arrays import save_npz
    from nebisect.evaluate.judge import evaluate
    from nebisect.targets.plugins import use_plugins

    package = _save(tmp_path / "m.mlpackage", _program(np.ones((16, 8), np.float32)))
    inputs = tmp_path / "x.npz"
    save_npz(inputs, {"x": np.ones((1, 8), np.float32)})
    plugin = str(SUPPORT / "plugins_crash.py")
    use_plugins([plugin], timeout=60)
    case = Case(SourceRef("mlpackage", str(package)), "sim:needs-newer-os", inputs_path=str(inputs),
                options=CaseOptions(plugins=(plugin,)))
    verdict = evaluate(case).verdict
    assert (verdict.status, verdict.stage) == ("skipped", "predict")
    assert verdict.message.startswith("model needs a newer OS: it is Core ML specification 9")

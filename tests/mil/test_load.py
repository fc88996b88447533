"""Program I/O: save/load round trips with weights and flexible shapes; load errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from nebisect.errors import NebisectError
from nebisect.mil.interp import run_program
from nebisect.mil.load import load_program, save_program
from nebisect.mil.quiet import import_coremltools

ct = import_coremltools()
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import get_new_symbol  # noqa: E402

RNG = np.random.default_rng(3)
WEIGHT = RNG.standard_normal((16, 32)).astype(np.float32)
BIAS = RNG.standard_normal(16).astype(np.float32)


def _weighted():
    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 32))], opset_version=ct.target.iOS17)
    def prog(x):
        hidden = mb.linear(x=x, weight=WEIGHT, bias=BIAS, name="hidden")
        gate = mb.sigmoid(x=hidden, name="gate")
        return mb.mul(x=hidden, y=gate, name="out")  # silu written out: must stay so

    return prog


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pkg") / "model.mlpackage"
    save_program(_weighted(), path)
    return path


def _copy(package: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy.mlpackage"
    shutil.copytree(package, target)
    return target


def test_round_trip_keeps_weights_ops_and_results(package):
    assert (package / "Data/com.apple.CoreML/weights/weight.bin").stat().st_size > WEIGHT.nbytes
    loaded = load_program(package)
    ops = [op.op_type for op in loaded.functions["main"].operations if op.op_type != "const"]
    assert ops == ["linear", "sigmoid", "mul"]
    x = RNG.standard_normal((2, 32)).astype(np.float32)
    before = run_program(_weighted(), {"x": x}).outputs["out"]
    after = run_program(loaded, {"x": x}).outputs["out"]
    np.testing.assert_array_equal(before, after)
    hidden = x.astype(np.float64) @ WEIGHT.T.astype(np.float64) + BIAS
    np.testing.assert_allclose(after, hidden / (1 + np.exp(-hidden)), rtol=1e-12)


def test_save_leaves_the_program_untouched_and_replaces_the_target(tmp_path):
    prog = _weighted()
    before = [op.name for op in prog.functions["main"].operations]
    target = tmp_path / "m.mlpackage"
    save_program(prog, target)
    save_program(prog, target)
    assert [op.name for op in prog.functions["main"].operations] == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.mlpackage"]


def test_flexible_shapes_survive_the_round_trip(tmp_path):
    seq = get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, seq))], opset_version=ct.target.iOS17)
    def prog(x):
        return mb.reduce_sum(x=x, axes=[1], name="total")

    prog.functions["main"].input_types = (
        ct.TensorType(name="x", shape=ct.Shape((1, ct.RangeDim(2, 9)))),
    )
    save_program(prog, tmp_path / "flex.mlpackage")
    loaded = load_program(tmp_path / "flex.mlpackage")
    out = run_program(loaded, {"x": np.ones((1, 9), np.float32)}).outputs["total"]
    np.testing.assert_array_equal(out, [9.0])
    outside = r"size 10 on axis 1, outside the flexible range 2\.\.9"
    with pytest.raises(NebisectError, match=outside):
        run_program(loaded, {"x": np.ones((1, 10), np.float32)})

    prog.functions["main"].input_types = (
        ct.TensorType(name="x", shape=ct.EnumeratedShapes(shapes=[(1, 2), (1, 4)])),
    )
    save_program(prog, tmp_path / "enum.mlpackage")
    enumerated = load_program(tmp_path / "enum.mlpackage")
    assert run_program(enumerated, {"x": np.ones((1, 4), np.float32)}).outputs["total"] == 4
    with pytest.raises(NebisectError, match="enumerated shapes"):
        run_program(enumerated, {"x": np.ones((1, 3), np.float32)})


def test_in_memory_program_and_mlmodel_are_accepted(package):
    prog = _weighted()
    assert load_program(prog) is prog
    model = ct.models.MLModel(str(package), skip_model_load=True)
    loaded = load_program(model)
    x = np.ones((2, 32), np.float32)
    np.testing.assert_array_equal(run_program(loaded, {"x": x}).outputs["out"],
                                  run_program(prog, {"x": x}).outputs["out"])


def test_missing_weight_file_is_named(package, tmp_path):
    broken = _copy(package, tmp_path)
    (broken / "Data/com.apple.CoreML/weights/weight.bin").unlink()
    with pytest.raises(NebisectError, match=r"missing weight file @model_path/weights/weight.bin"):
        load_program(broken)


def test_corrupt_package_and_other_bad_paths(package, tmp_path):
    corrupt = _copy(package, tmp_path)
    (corrupt / "Data/com.apple.CoreML/model.mlmodel").write_bytes(b"\x08\x96\x01garbage" * 7)
    with pytest.raises(NebisectError, match="corrupt model package"):
        load_program(corrupt)
    with pytest.raises(NebisectError, match="no such file or directory"):
        load_program(tmp_path / "absent.mlpackage")
    (tmp_path / "empty.mlpackage").mkdir()
    with pytest.raises(NebisectError, match=r"not an \.mlpackage"):
        load_program(tmp_path / "empty.mlpackage")
    with pytest.raises(NebisectError, match=r"must end in \.mlpackage"):
        save_program(_weighted(), tmp_path / "model.bin")


def test_neuralnetwork_model_is_refused_with_the_reason(tmp_path):
    from coremltools.models import datatypes
    from coremltools.models.neural_network import NeuralNetworkBuilder

    builder = NeuralNetworkBuilder([("x", datatypes.Array(3))], [("y", datatypes.Array(3))])
    builder.add_activation("relu", "RELU", "x", "y")
    path = tmp_path / "old.mlmodel"
    ct.utils.save_spec(builder.spec, str(path))
    with pytest.raises(NebisectError, match="neuralnetwork model; nebisect simulates ML programs"):
        load_program(path)


def test_package_without_its_empty_weights_dir_still_loads(tmp_path) -> None:
    """git drops empty directories: a weightless package from a checkout must still load."""

    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3))])
    def prog(x):  # type: ignore[no-untyped-def]
        return mb.softplus(x=x)

    package = tmp_path / "softplus.mlpackage"
    save_program(prog, package)
    weights = package / "Data" / "com.apple.CoreML" / "weights"
    assert weights.is_dir() and not any(weights.iterdir())
    shutil.rmtree(weights)
    before = sorted(p.relative_to(package) for p in package.rglob("*"))
    loaded = load_program(package)
    assert [op.op_type for op in loaded.functions["main"].operations] == ["softplus"]
    assert sorted(p.relative_to(package) for p in package.rglob("*")) == before


def _state(package: Path) -> list[tuple[str, int, int]]:
    """Every entry of the package with its inode and mtime: a file renamed over another
    (coremltools' ``ModelPackage`` rewriting ``Manifest.json``) changes its inode."""
    return sorted((str(p.relative_to(package)), p.stat().st_ino, p.stat().st_mtime_ns)
                  for p in package.rglob("*"))


def test_reading_a_package_never_writes_to_it(package, tmp_path):
    """coremltools 9.0's ``load_spec`` and ``_try_get_weights_dir_path`` open a read-write
    ModelPackage that renames a fresh ``Manifest.<uuid>`` over ``Manifest.json``; a run
    hashing the package meanwhile saw that file vanish. nebisect reads it itself."""
    import gc

    from nebisect.mil.load import read_spec
    from nebisect.sources.inputs import describe_package

    copy = _copy(package, tmp_path)
    before = _state(copy)
    program = load_program(copy)
    assert read_spec(copy).WhichOneof("Type") == "mlProgram"
    assert [d.name for d in describe_package(copy)] == ["x"]
    del program
    gc.collect()
    assert _state(copy) == before
    ct.utils.load_spec(str(copy))
    gc.collect()
    assert _state(copy) != before  # what nebisect avoids


def _escaping(package: Path, tmp_path: Path, how: str) -> Path:
    """A copy of ``package`` that reaches outside itself (``how``); what it reaches is a
    working copy of its own model, so a reader that follows it loads without a word."""
    import json

    copy = _copy(package, tmp_path)
    outside = tmp_path / "outside"
    shutil.copytree(copy / "Data/com.apple.CoreML", outside)
    manifest = json.loads((copy / "Manifest.json").read_text())
    entries = manifest["itemInfoEntries"]
    root = entries[manifest["rootModelIdentifier"]]
    weights = next(e for e in entries.values() if e["name"] == "weights")
    if how == "absolute root":
        root["path"] = "/etc/passwd"
    elif how == "root up":
        root["path"] = "../../outside/model.mlmodel"
    elif how == "weights up":
        weights["path"] = "../../outside/weights"
    elif how == "absolute weights":
        weights["path"] = str(outside / "weights")
    elif how == "symlinked root":
        (copy / "Data/com.apple.CoreML/model.mlmodel").unlink()
        (copy / "Data/com.apple.CoreML/model.mlmodel").symlink_to(outside / "model.mlmodel")
    elif how == "symlinked weight":
        (copy / "Data/com.apple.CoreML/weights/weight.bin").unlink()
        (copy / "Data/com.apple.CoreML/weights/weight.bin").symlink_to(
            outside / "weights/weight.bin")
    elif how == "symlinked data":
        shutil.rmtree(copy / "Data")
        (copy / "Data").mkdir()
        (copy / "Data/com.apple.CoreML").symlink_to(outside, target_is_directory=True)
    (copy / "Manifest.json").write_text(json.dumps(manifest))
    return copy


ESCAPES = {
    "absolute root": "Manifest.json names '/etc/passwd', a path outside the package",
    "root up": "Manifest.json names '../../outside/model.mlmodel', a path outside the package",
    "weights up": "Manifest.json names '../../outside/weights', a path outside the package",
    "absolute weights": "Manifest.json names '{outside}/weights', a path outside the package",
    "symlinked root": "Data/com.apple.CoreML/model.mlmodel is a symlink to "
                      "{outside}/model.mlmodel, outside the package",
    "symlinked weight": "Data/com.apple.CoreML/weights/weight.bin is a symlink to "
                        "{outside}/weights/weight.bin, outside the package",
    "symlinked data": "Data/com.apple.CoreML is a symlink to {outside}, outside the package",
}


@pytest.mark.parametrize("how", ESCAPES)
def test_a_package_never_reads_outside_itself(package, tmp_path, how):
    from nebisect.mil.load import read_spec

    escaping = _escaping(package, tmp_path, how)
    message = f"{escaping}: " + ESCAPES[how].format(outside=tmp_path / "outside")
    for read in (read_spec, load_program):
        with pytest.raises(NebisectError) as raised:
            read(escaping)
        assert str(raised.value) == message


def test_a_symlink_inside_the_package_is_followed(package, tmp_path):
    copy = _copy(package, tmp_path)
    model = copy / "Data/com.apple.CoreML/model.mlmodel"
    model.rename(model.with_name("real.mlmodel"))
    model.symlink_to("real.mlmodel")
    assert [op.op_type for op in load_program(copy).functions["main"].operations] == [
        op.op_type for op in load_program(package).functions["main"].operations]

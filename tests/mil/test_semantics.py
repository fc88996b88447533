"""Runtime semantics (issue 15 item 1): each Core ML runtime variant reproduces the numbers
of the report it cites, ``spec`` keeps the op definition, and the semantics is part of the
sim target's name (so of a case's identity)."""

from __future__ import annotations

import numpy as np
import pytest
from support import REPO

from nebisect.mil.interp import run_program
from nebisect.mil.semantics import SEMANTICS
from nebisect.targets.registry import get_target
from nebisect.targets.sim import follow_semantics
from nebisect.targets.spec import SIM_SEMANTICS, TargetSpec, TargetSpecError

ct = pytest.importorskip("coremltools")
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import types  # noqa: E402


def _mod_program(dtype):
    @mb.program(input_specs=[mb.TensorSpec((4,), dtype), mb.TensorSpec((4,), dtype)],
                opset_version=ct.target.iOS17)
    def prog(x, y):
        return mb.mod(x=x, y=y, name="out")

    return prog


@pytest.mark.parametrize("dtype", [types.fp32, types.int32])
def test_mod_runs_truncated_and_folds_floored_pr_2778(dtype):
    """PR #2778: mod([-7,7,-7,7], [2,-2,-2,2]) "folds to [1,-1,-1,1] but computes
    [-1,1,-1,1] on device"."""
    prog = _mod_program(dtype)
    np_dtype = np.float32 if dtype is types.fp32 else np.int32
    inputs = {"x": np.array([-7, 7, -7, 7], np_dtype), "y": np.array([2, -2, -2, 2], np_dtype)}
    runtime = run_program(prog, inputs, "fp32")
    spec = run_program(prog, inputs, "fp32", semantics="spec")
    assert runtime.outputs["out"].tolist() == [-1, 1, -1, 1]
    assert spec.outputs["out"].tolist() == [1, -1, -1, 1]


def test_mod_negative_shift_of_torch_roll_pr_2778():
    """PR #2778: "`mod(-2, 5)` returns `-2`, not `3`" at run time."""
    prog = _mod_program(types.int32)
    inputs = {"x": np.array([-2, -1, -8, 3], np.int32), "y": np.full(4, 5, np.int32)}
    assert run_program(prog, inputs, "fp32").outputs["out"].tolist() == [-2, -1, -3, 3]
    assert run_program(prog, inputs, "fp32", semantics="spec").outputs["out"].tolist() == [
        3, 4, 2, 3]


def _pow_program(base):
    @mb.program(input_specs=[mb.TensorSpec((4,))], opset_version=ct.target.iOS17)
    def prog(y):
        return mb.pow(x=np.float32(base), y=y, name="out")

    return prog


def test_pow_with_constant_base_two_squares_the_exponent_issue_2628():
    """#2628: "mb.pow(x=2.0, y=0.0) != 1.0" (the device returns 0.0); PR #2742: a constant
    base of 2 "returns y ** 2 instead of 2 ** y"; other bases are computed correctly."""
    y = {"y": np.array([0.0, 1.0, 3.0, -1.5], np.float32)}
    assert run_program(_pow_program(2.0), y, "fp32").outputs["out"].tolist() == [
        0.0, 1.0, 9.0, 2.25]
    assert run_program(_pow_program(2.0), y, "fp32", semantics="spec").outputs[
        "out"].tolist() == pytest.approx([1.0, 2.0, 8.0, 2.0**-1.5])
    assert run_program(_pow_program(3.0), y, "fp32").outputs["out"].tolist() == pytest.approx(
        [1.0, 3.0, 27.0, 3.0**-1.5])


def test_pow_with_a_computed_base_of_two_is_not_the_fast_path():
    """The fast path keys on a *constant* operand: a base that is only known at run time
    (here an input holding 2) is computed by the definition."""

    @mb.program(input_specs=[mb.TensorSpec((2,)), mb.TensorSpec((2,))],
                opset_version=ct.target.iOS17)
    def prog(x, y):
        return mb.pow(x=x, y=y, name="out")

    inputs = {"x": np.full(2, 2.0, np.float32), "y": np.array([0.0, 3.0], np.float32)}
    assert run_program(prog, inputs, "fp32").outputs["out"].tolist() == [1.0, 8.0]


def test_semantics_is_part_of_the_sim_target_name():
    assert str(TargetSpec.parse("sim:fp16:spec")) == "sim:fp16:spec"
    assert TargetSpec.parse("sim:fp16").semantics == ""
    assert get_target("sim:ane:spec").semantics == "spec"
    assert get_target("sim:fp32").semantics == "coreml"
    with pytest.raises(TargetSpecError, match="semantics is one of coreml, spec"):
        TargetSpec.parse("sim:fp16:torch")
    with pytest.raises(TargetSpecError):
        TargetSpec.parse("coreml:ne:spec")
    assert sorted(SEMANTICS.names()) == sorted(SIM_SEMANTICS)  # the grammar and the registry


def test_a_sim_reference_follows_the_targets_semantics():
    assert follow_semantics("sim:fp64", "sim:fp16:spec") == "sim:fp64:spec"
    assert follow_semantics("sim:fp64", "sim:fp16") == "sim:fp64"
    assert follow_semantics("sim:fp64:coreml", "sim:fp16:spec") == "sim:fp64:coreml"
    assert follow_semantics("torch:cpu:fp64", "sim:fp16:spec") == "torch:cpu:fp64"


def test_run_takes_the_semantics_in_the_target_name(tmp_path):
    """`nebisect run PKG -t sim:fp32:spec --reference sim:fp64:coreml`: the semantics
    reaches the isolated child, where the `:spec` target's floored mod(-7, 2) = 1 is judged
    against the runtime's -1, while sim:fp32 (runtime semantics) agrees."""
    import json
    import os
    import subprocess
    import sys

    from nebisect.arrays import save_npz

    package = tmp_path / "mod.mlpackage"
    model = ct.convert(_mod_program(types.fp32), convert_to="mlprogram",
                       compute_precision=ct.precision.FLOAT32,
                       minimum_deployment_target=ct.target.iOS17)
    model.save(str(package))
    npz = tmp_path / "x.npz"
    save_npz(npz, {"x": np.array([-7, 7, -7, 7], np.float32),
                   "y": np.array([2, -2, -2, 2], np.float32)})
    root = REPO
    env = {**os.environ, "PYTHONPATH": str(root)}

    done = subprocess.run(
        [sys.executable, "-m", "nebisect", "run", str(package), "--inputs", str(npz),
         "-t", "sim:fp32", "-t", "sim:fp32:spec", "--reference", "sim:fp64:coreml", "--json"],
        capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 1, done.stderr
    rows = {r["target"]: r for r in json.loads(done.stdout)["rows"]}
    assert rows["sim:fp32"]["verdict"]["status"] == "pass"
    assert rows["sim:fp32:spec"]["verdict"]["status"] == "mismatch"

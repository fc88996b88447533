"""Standalone repro scripts: literals, builder source equal to the plan, and scripts that
reproduce their signature alone in a fresh interpreter."""

from __future__ import annotations

import platform
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.bisect_programs import lse_chain, meanpool_program

from nebisect.mil.interp import run_program
from nebisect.mil.quiet import import_coremltools
from nebisect.minimize.graphs.mil import MilGraph, build
from nebisect.minimize.repro.script import (
    INLINE_LIMIT,
    builder_source,
    devices_for,
    literal,
    mil_script,
    op_of_interest,
    write_mil_repro,
)
from nebisect.targets.spec import TargetSpec

ct = import_coremltools()
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import Function, Program, get_new_symbol, types  # noqa: E402


@pytest.mark.parametrize("value", [
    np.float16(2.5), np.float32(-0.0), np.int32(7), np.bool_(True), True, 3, 0.1, "fp16",
    float("inf"), np.array([1, 2], np.int32), np.zeros((2, 3), np.float16),
    np.array(5.0, np.float32), np.zeros((0, 3), np.float32), np.array(["a", "b"]),
    np.array([np.inf, -np.inf, np.nan, 1e-7], np.float32), np.array([[True], [False]]),
])
def test_literals_round_trip_with_dtype_and_shape(value: Any) -> None:
    back = eval(literal(value), {"np": np})
    assert type(back) is type(value)
    if isinstance(value, np.ndarray | np.generic):
        assert back.dtype == value.dtype and np.shape(back) == np.shape(value)
        np.testing.assert_array_equal(back, value)
    else:
        assert back == value or (back != back and value != value)


def busy_program() -> Any:
    """Adapters (bool, rank-0), a multi-output split, a variadic concat, a symbolic
    sequence and a constant too large to print."""
    seq = get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, seq, 80), dtype=types.fp16)],
                opset_version=ct.target.iOS17)
    def prog(x: Any) -> Any:
        w = mb.mul(x=x, y=np.linspace(-1, 1, 80).astype(np.float16), name="w")
        parts = mb.split(x=w, num_splits=2, axis=2, name="sp")
        g = mb.greater(x=parts[0], y=np.float16(0.0), name="gt")
        sel = mb.select(cond=g, a=parts[0], b=parts[1], name="sel")
        r = mb.reduce_sum(x=sel, axes=[0, 1, 2], keep_dims=False, name="rs")
        cat = mb.concat(values=[parts[1], sel], axis=2, name="cat")
        return mb.mul(x=cat, y=r, name="scaled")

    return prog


def exec_build(source: str, constants: dict[str, np.ndarray]) -> Any:
    scope: dict[str, Any] = {"mb": mb, "np": np, "ct": ct, "types": types,
                             "Function": Function, "Program": Program,
                             "get_new_symbol": get_new_symbol, "CONSTANTS": constants}
    exec(source, scope)
    return scope["build_program"]()


def ops(program: Any) -> list[tuple[str, str, list[str]]]:
    """Op types and names (a cast adapter's dtype constant gets a counter-made name)."""
    return [(o.op_type, "" if o.op_type == "const" else o.name, [v.name for v in o.outputs])
            for o in program.functions["main"].operations if o.op_type != "const"]


def test_builder_source_builds_what_the_plan_builds() -> None:
    program = busy_program()
    x = {"x": np.linspace(-2, 2, 5 * 80).reshape(1, 5, 80).astype(np.float16)}
    recorded = {**x, **run_program(program, x, "fp64", intermediates=True).intermediates}
    graph = MilGraph(program)
    for units in (["w"], ["sel", "rs", "cat", "scaled"], ["sp", "cat"], list(graph.units)):
        plan = graph.plan(units, recorded)
        source, constants = builder_source(plan)
        rebuilt, reference = exec_build(source, constants), build(plan)
        assert ops(rebuilt) == ops(reference), units
        a = run_program(rebuilt, plan.feeds, "fp16").outputs
        b = run_program(reference, plan.feeds, "fp16").outputs
        assert sorted(a) == sorted(b) == sorted(plan.outputs)
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
    whole, constants = builder_source(graph.plan(["w"], recorded))
    assert "CONSTANTS['w_y_0']" in whole and constants["w_y_0"].size > INLINE_LIMIT
    assert "symbols['" in whole  # the sequence stays symbolic


def test_devices_for_targets() -> None:
    assert devices_for(TargetSpec.parse("sim:ane")) == ("CPU_AND_NE", "sim:ane")
    assert devices_for(TargetSpec.parse("coreml:ne")) == ("CPU_AND_NE", "sim:ane")
    assert devices_for(TargetSpec.parse("coreml:cpu")) == ("CPU_ONLY", "sim:fp32")
    assert devices_for(TargetSpec.parse("sim:fp16")) == ("CPU_AND_GPU", "sim:fp16")
    assert devices_for(TargetSpec.parse("coreml-remote:phone:gpu")) == ("CPU_AND_GPU", "sim:fp16")


def write(plan_units: list[str], program: Any, feeds: dict[str, np.ndarray], directory: Path,
          signature: str, target: str = "sim:ane") -> Path:
    graph = MilGraph(program)
    recorded = {**feeds, **run_program(program, feeds, "fp64", intermediates=True).intermediates}
    write_mil_repro(directory, graph.plan(plan_units, recorded), signature=signature,
                    target=TargetSpec.parse(target),
                    header='A "test" repro \\ with awkward text """.')
    return directory / "repro.py"


def test_error_repro_reproduces_in_a_fresh_interpreter(tmp_path: Path) -> None:
    mask = np.ones((1, 6), np.int32)
    feeds = {"tokens": np.ones((1, 6, 8), np.float32), "attention_mask": mask}
    signature = ("error:predict:SimPredictError: Invalid blob shape: Data-dependent shapes "
                 "were disabled: pooled - [?, N]")
    script = write(["expand", "mask16", "count", "clipped", "pooled"], meanpool_program(),
                   feeds, tmp_path, signature)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         cwd=tmp_path.parent, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"observed: {signature}" in run.stdout
    assert "nebisect's simulator sim:ane" in run.stdout


def test_a_repro_that_does_not_reproduce_says_so(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    program = lse_chain.chain_program(9)
    script = write(["lse"], program, lse_chain.chain_inputs(), tmp_path, "mismatch:collapse",
                   target="sim:fp16")  # a careful fp16 device computes the lse correctly
    assert runpy.run_path(str(script), run_name="repro")["main"]() == 1
    printed = capsys.readouterr().out
    assert "observed: pass" in printed and "NOT REPRODUCED" in printed
    script = write(["lse"], program, lse_chain.chain_inputs(), tmp_path / "ane",
                   "mismatch:collapse")
    assert runpy.run_path(str(script), run_name="repro")["main"]() == 0
    assert "lse[0, 0, 0, 0]: output 0 vs reference 11.4657" in capsys.readouterr().out


def lse_plan(units: list[str], ops: int = 9) -> Any:
    program = lse_chain.chain_program(ops)
    feeds = lse_chain.chain_inputs()
    recorded = {**feeds, **run_program(program, feeds, "fp64", intermediates=True).intermediates}
    return MilGraph(program).plan(units, recorded)


def test_device_repro_asserts_the_op_and_keeps_the_ne_attract_wrapper(tmp_path: Path) -> None:
    plan = lse_plan(["lse"])
    assert op_of_interest(TargetSpec.parse("coreml:ne"), plan) == "reduce_log_sum_exp"
    assert op_of_interest(TargetSpec.parse("coreml-remote:phone:ne"), plan) == "reduce_log_sum_exp"
    script, _ = mil_script(plan, signature="mismatch:collapse",
                           target=TargetSpec.parse("coreml:ne"),
                           header="h", op_of_interest="reduce_log_sum_exp")
    compile(script, "repro.py", "exec")
    assert "OP_OF_INTEREST = 'reduce_log_sum_exp'" in script
    assert "COMPUTE_UNITS = 'CPU_AND_NE'" in script
    assert "op3 = ne_attract_input(main.inputs['op3'])" in script
    assert "main.set_outputs([lse] + ne_attract_head(lse))" in script
    scope = runpy.run_path(str(write_mil_repro(tmp_path, plan, signature="mismatch:collapse",
                                               target=TargetSpec.parse("coreml:ne"), header="h",
                                               op_of_interest="reduce_log_sum_exp")))
    wrapped = scope["build_program"]()
    assert [o.op_type for o in wrapped.functions["main"].operations
            if o.op_type != "const"] == ["reshape", "conv", "reshape", "reduce_log_sum_exp",
                                         "reshape", "linear"]
    exact = run_program(wrapped, plan.feeds, "fp64").outputs
    np.testing.assert_array_equal(exact["lse"], run_program(build(plan), plan.feeds,
                                                            "fp64").outputs["lse"])
    assert sorted(exact) == ["lse", "ne_attract_head"]
    assert scope["judge"](exact, {**exact, "ne_attract_head": exact["lse"][:0]})[0] == "pass"
    run = subprocess.run([sys.executable, str(tmp_path / "repro.py")], capture_output=True,
                         text=True, cwd=tmp_path.parent, timeout=300)
    if platform.system() != "Darwin":  # off macOS the Neural Engine is sim:ane
        assert run.returncode == 0 and "observed: mismatch:collapse" in run.stdout, run.stdout


def test_device_repro_of_a_routable_graph_asserts_its_last_compute_op() -> None:
    plan = lse_plan(["op3", "lse", "op5"])
    assert op_of_interest(TargetSpec.parse("coreml:gpu"), plan) == "mul"
    coreml_ne = TargetSpec.parse("coreml:ne")
    script, _ = mil_script(plan, signature="mismatch:tolerance", target=coreml_ne,
                           header="h", op_of_interest=op_of_interest(coreml_ne, plan))
    compile(script, "repro.py", "exec")
    assert "OP_OF_INTEREST = 'mul'" in script and "ne_attract" not in script
    assert op_of_interest(TargetSpec.parse("coreml:cpu"), plan) == ""


def test_simulator_repros_are_the_graph_as_kept() -> None:
    plan = lse_plan(["lse"])
    for target in (TargetSpec.parse("sim:ane"), TargetSpec.parse("sim:fp16")):
        assert op_of_interest(target, plan) == ""
        script, _ = mil_script(plan, signature="mismatch:collapse", target=target, header="h",
                               op_of_interest=op_of_interest(target, plan))
        assert "OP_OF_INTEREST = ''" in script and "ne_attract" not in script
        assert "op3 = main.inputs['op3']" in script and "main.set_outputs([lse])" in script

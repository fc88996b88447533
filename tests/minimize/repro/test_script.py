"""Standalone repro scripts: literals, builder source equal to the plan, and scripts that
reproduce their signature alone in a fresh interpreter."""

from __future__ import annotations

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
    write_mil_repro,
)

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
    assert devices_for("sim:ane") == ("CPU_AND_NE", "sim:ane")
    assert devices_for("coreml:ne") == ("CPU_AND_NE", "sim:ane")
    assert devices_for("coreml:cpu") == ("CPU_ONLY", "sim:fp32")
    assert devices_for("sim:fp16") == ("CPU_AND_GPU", "sim:fp16")


def write(plan_units: list[str], program: Any, feeds: dict[str, np.ndarray], directory: Path,
          signature: str, target: str = "sim:ane") -> Path:
    graph = MilGraph(program)
    recorded = {**feeds, **run_program(program, feeds, "fp64", intermediates=True).intermediates}
    write_mil_repro(directory, graph.plan(plan_units, recorded), signature=signature,
                    target=target, header='A "test" repro \\ with awkward text """.')
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

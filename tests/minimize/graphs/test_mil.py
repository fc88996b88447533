"""Cutting MIL programs: structure of the extracted program and its numerics."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from nebisect.mil import interp, load
from nebisect.mil.graph import ExtractionError
from nebisect.mil.quiet import import_coremltools
from nebisect.minimize.graphs.mil import MilGraph, build, extract

ct = import_coremltools()
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import get_new_symbol, types  # noqa: E402


def branchy() -> Any:
    """mul → lse (output), split → {greater, concat (output)} → select → sum → mul."""

    @mb.program(
        input_specs=[mb.TensorSpec(shape=(1, 32, 4, 4), dtype=types.fp16)],
        opset_version=ct.target.iOS17,
    )
    def prog(x: Any) -> Any:
        y = mb.mul(x=x, y=np.float16(2.0), name="m")
        z = mb.reduce_log_sum_exp(x=y, axes=[1], keep_dims=True, name="lse")
        s = mb.split(x=y, num_splits=2, axis=1, name="sp")
        g = mb.greater(x=s[0], y=np.float16(0.25), name="gt")
        c = mb.concat(values=[s[0], s[1]], axis=1, name="cc")
        w = mb.select(cond=g, a=s[0], b=s[1], name="sel")
        r = mb.reduce_sum(x=w, axes=[0, 1, 2, 3], keep_dims=False, name="rs")
        t = mb.mul(x=r, y=np.float16(0.5), name="t")
        return z, c, t

    return prog


def ops_of(program: Any) -> list[str]:
    return [op.op_type for op in program.functions["main"].operations]


def names_of(program: Any) -> list[str]:
    return [op.name for op in program.functions["main"].operations]


def fake_recording(graph: MilGraph) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        name: rng.standard_normal([int(d) for d in var.shape])
        for name, var in graph.vars.items()
        if var.val is None and var.dtype is not None
    }


def test_dependency_view() -> None:
    graph = MilGraph(branchy())
    assert graph.units == ("m", "lse", "sp", "gt", "cc", "sel", "rs", "t")
    assert graph.dag.consumes["sel"] == ("gt", "sp_0", "sp_1")
    assert graph.dag.consumes["m"] == ("x",)  # the const y is not a dependency
    assert graph.dag.produces["sp"] == ("sp_0", "sp_1")
    assert graph.dag.producer["sp_1"] == "sp"
    assert graph.dag.inputs == ("x",) and graph.dag.outputs == ("lse", "cc", "t")
    assert graph.op_types["lse"] == "reduce_log_sum_exp"
    assert graph.dag.ancestors("sel") == ["gt", "sp", "m"]


def test_single_op_with_its_constants() -> None:
    graph = MilGraph(branchy())
    program, feeds = extract(graph, ["lse"], fake_recording(graph))
    assert ops_of(program) == ["const", "const", "reduce_log_sum_exp"]
    function = program.functions["main"]
    assert list(function.inputs) == ["m"]
    assert [v.name for v in function.outputs] == ["lse"]
    assert feeds["m"].dtype == np.float16 and feeds["m"].shape == (1, 32, 4, 4)
    lse = function.operations[-1]
    assert list(lse.axes.val) == [1] and bool(lse.keep_dims.val)


def test_adapters_for_bool_and_rank0_inputs() -> None:
    graph = MilGraph(branchy())
    recorded = fake_recording(graph)
    recorded["gt"] = recorded["gt"] > 0
    recorded["rs"] = np.float64(3.0)
    program, feeds = extract(graph, ["sel", "t"], recorded)
    function = program.functions["main"]
    assert sorted(function.inputs) == ["gt__input", "rs__input", "sp_0", "sp_1"]
    assert feeds["gt__input"].dtype == np.int32
    assert feeds["rs__input"].shape == (1,) and feeds["rs__input"].dtype == np.float16
    assert ops_of(program) == ["const", "cast", "squeeze", "select", "const", "mul"]
    assert names_of(program)[1:3] == ["gt", "rs"]  # adapters produce the original names
    assert [v.name for v in function.outputs] == ["sel", "t"]


def test_multi_output_and_variadic_ops_keep_names() -> None:
    graph = MilGraph(branchy())
    program, feeds = extract(graph, ["sp", "cc"], fake_recording(graph))
    assert ops_of(program) == ["const", "const", "split", "const", "const", "concat"]
    split = list(program.functions["main"].operations)[2]
    assert [v.name for v in split.outputs] == ["sp_0", "sp_1"]
    assert [v.name for v in program.functions["main"].outputs] == ["cc"]
    assert list(feeds) == ["m"]


def test_compile_time_values_stay_constants() -> None:
    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 6))], opset_version=ct.target.iOS17)
    def prog(x: Any) -> Any:
        shape = mb.shape(x=mb.relu(x=x, name="r"), name="sh")
        flat = mb.reduce_prod(x=shape, axes=[0], keep_dims=True, name="n")
        return mb.reshape(x=x, shape=flat, name="flat")

    graph = MilGraph(prog)
    program, feeds = extract(graph, ["flat"], {"x": np.ones((2, 6))})
    assert list(feeds) == ["x"]
    assert ops_of(program) == ["const", "reshape"]
    assert list(program.functions["main"].operations[0].outputs[0].val) == [12]


def test_symbolic_dims_stay_symbolic() -> None:
    seq = get_new_symbol()

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, seq, 8))], opset_version=ct.target.iOS17)
    def prog(x: Any) -> Any:
        y = mb.relu(x=x, name="r")
        return mb.reduce_mean(x=y, axes=[1], keep_dims=False, name="pool")

    graph = MilGraph(prog)
    program, feeds = extract(graph, ["pool"], {"r": np.ones((1, 5, 8))})
    shape = program.functions["main"].inputs["r"].shape
    assert shape[0] == 1 and shape[2] == 8 and not isinstance(shape[1], int)
    assert feeds["r"].shape == (1, 5, 8)


def test_errors() -> None:
    graph = MilGraph(branchy())
    with pytest.raises(ExtractionError, match="no recorded value for 'm'"):
        extract(graph, ["lse"], {})
    with pytest.raises(ExtractionError, match="empty"):
        extract(graph, [], {})

    @mb.program(input_specs=[mb.TensorSpec(shape=(2,))], opset_version=ct.target.iOS17)
    def looped(x: Any) -> Any:
        return mb.cond(
            pred=mb.greater(x=mb.reduce_sum(x=x, axes=[0]), y=0.0),
            _true_fn=lambda: mb.relu(x=x), _false_fn=lambda: mb.sigmoid(x=x),
        )

    with pytest.raises(ExtractionError, match="nested blocks"):
        MilGraph(looped)


def test_numerics_of_cuts_match_the_original() -> None:
    program = branchy()
    x = {"x": np.linspace(-3, 3, 512).reshape(1, 32, 4, 4).astype(np.float16)}
    full = interp.run_program(program, x, "fp16", intermediates=True)
    recorded = {**x, **full.intermediates}
    graph = MilGraph(program)
    for units in (["lse"], ["sel", "rs", "t"], ["sp", "cc"], ["gt", "sel"], list(graph.units)):
        sub, feeds = extract(graph, units, recorded)
        result = interp.run_program(sub, feeds, "fp16")
        assert result.outputs, units
        for name, value in result.outputs.items():
            np.testing.assert_array_equal(value, recorded[name], err_msg=f"{units}: {name}")


def test_saved_package_loads_back_with_same_numerics(tmp_path: Any) -> None:
    program = branchy()
    x = {"x": np.linspace(-3, 3, 512).reshape(1, 32, 4, 4).astype(np.float16)}
    recorded = {**x, **interp.run_program(program, x, "fp64", intermediates=True).intermediates}
    graph = MilGraph(program)
    sub, feeds = extract(graph, ["sel", "rs", "t"], recorded)
    path = tmp_path / "cut.mlpackage"
    load.save_program(sub, path)
    loaded = load.load_program(path)
    assert [op for op in ops_of(loaded) if op != "const"] == ["cast", "select", "reduce_sum",
                                                             "mul"]
    before = interp.run_program(sub, feeds, "fp64").outputs
    after = interp.run_program(loaded, feeds, "fp64").outputs
    assert sorted(after) == ["t"]
    np.testing.assert_allclose(after["t"], before["t"], rtol=1e-6)


def test_build_is_repeatable() -> None:
    graph = MilGraph(branchy())
    plan = graph.plan(["lse", "cc", "sp"], fake_recording(graph))
    assert plan.op_types == ["const", "const", "reduce_log_sum_exp", "const", "const",
                             "split", "const", "const", "concat"]
    assert plan.outputs == ["lse", "cc"]
    assert names_of(build(plan)) == names_of(build(plan))

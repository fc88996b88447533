"""Two plans of one program compared op by op (:func:`nebisect.mil.plan.diff_plans`),
and the second prediction re-running only what they compute differently
(:meth:`~nebisect.mil.interp.CompiledProgram.run_beside`), bit for bit the prediction
it makes alone: ``sim:fp16`` and ``sim:ane`` run one fp16 program, the Neural Engine
profile computing a few of its ops otherwise."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from support.state_programs import running_sum

import nebisect.mil.interp as interp
from nebisect.mil.interp import CompiledProgram, SimResult, compile_program
from nebisect.mil.plan import diff_plans, same_value
from nebisect.mil.quiet import import_coremltools

ct = import_coremltools()
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import types  # noqa: E402

C = 32


@mb.program(input_specs=[mb.TensorSpec(shape=(1, C, 2), dtype=types.fp16)],
            opset_version=ct.target.iOS17)
def half_program(x):
    """fp16 in: only log-sum-exp's kernel (and what reads it) differs on the Neural Engine."""
    scaled = mb.mul(x=x, y=np.float16(2.0), name="scaled")
    lse = mb.reduce_log_sum_exp(x=scaled, axes=[1], keep_dims=True, name="lse")
    shifted = mb.add(x=lse, y=np.float16(1.0), name="shifted")
    rectified = mb.relu(x=scaled, name="rectified")
    return shifted, rectified


@mb.program(input_specs=[mb.TensorSpec(shape=(1, C, 2), dtype=types.fp32)],
            opset_version=ct.target.iOS17)
def mixed_program(x):
    """fp32 in, an fp32 op before the cast (the Neural Engine leaves it to the CPU, which
    stores its result in fp32), softplus (a kernel of the Neural Engine's own) after."""
    offset = mb.add(x=x, y=np.float32(0.1), name="offset")
    half = mb.cast(x=offset, dtype="fp16", name="half")
    soft = mb.softplus(x=half, name="soft")
    doubled = mb.mul(x=half, y=np.float16(2.0), name="doubled")
    return mb.cast(x=mb.add(x=soft, y=doubled, name="total"), dtype="fp32", name="out")


def _plans(program: Any) -> tuple[CompiledProgram, CompiledProgram]:
    fp16 = compile_program(program, "fp16", unit="gpu")
    ane = compile_program(program, "fp16", profile="ane")
    return fp16, ane


def _identical(first: SimResult, second: SimResult) -> None:
    for part in ("outputs", "intermediates"):
        mine, theirs = getattr(first, part), getattr(second, part)
        assert mine.keys() == theirs.keys()
        for name, value in mine.items():
            assert same_value(np.asarray(value), np.asarray(theirs[name])), (part, name)
    assert (first.placement, first.op_types, first.fallbacks) == (
        second.placement, second.op_types, second.fallbacks)


def _steps_run(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the steps the interpreter runs from now on."""
    ran: list[str] = []
    run_step = interp._run_step

    def spy(step: Any, env: dict[str, Any]) -> None:
        ran.append(step.name)
        run_step(step, env)

    monkeypatch.setattr(interp, "_run_step", spy)
    return ran


def test_only_the_kernel_the_profile_replaces_differs_and_what_reads_it_reruns(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fp16, ane = _plans(half_program)
    diff = diff_plans(fp16.plan, ane.plan)
    assert diff.shareable and diff.entries == frozenset()
    assert diff.differing == {"lse": "kernel"}
    assert diff.downstream(ane.plan) == ["lse", "shifted"]
    assert diff_plans(ane.plan, fp16.plan).differing == {"lse": "kernel"}
    # past log(65504 / 32) the Neural Engine's sum overflows: its log-sum-exp collapses
    inputs = {"x": np.full((1, C, 2), 3.9, np.float16)}
    base = fp16.evaluate(inputs)
    ran = _steps_run(monkeypatch)
    shared = ane.run_beside(base, diff, inputs, intermediates=True)
    assert ran == ["lse", "shifted"]
    assert float(shared.intermediates["lse"].flat[0]) == 0.0
    monkeypatch.undo()
    _identical(shared, ane.run(inputs, intermediates=True))
    _identical(fp16.run_beside(ane.evaluate(inputs), diff_plans(ane.plan, fp16.plan), inputs,
                               intermediates=True), fp16.run(inputs, intermediates=True))


def test_an_op_left_to_the_cpu_and_an_input_held_otherwise_differ(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fp16, ane = _plans(mixed_program)
    diff = diff_plans(fp16.plan, ane.plan)
    # sim:fp16 rounds the fp32 input and 0.1 to fp16; the Neural Engine's CPU keeps fp32
    assert "x" in diff.entries
    assert diff.differing["offset"] == "output storage"
    assert diff.differing["soft"] == "kernel"
    assert "doubled" not in diff.differing
    assert diff.downstream(ane.plan) == ["offset", "half", "soft", "doubled", "total", "out"]
    rng = np.random.default_rng(0)
    for inputs in ({"x": rng.normal(0, 3, (1, C, 2)).astype(np.float32)},
                   {"x": np.full((1, C, 2), 10.3984375, np.float32)}):
        base = fp16.evaluate(inputs)
        ran = _steps_run(monkeypatch)
        shared = ane.run_beside(base, diff, inputs, intermediates=True)
        monkeypatch.undo()
        assert ran[:2] == ["offset", "half"] and "soft" in ran
        _identical(shared, ane.run(inputs, intermediates=True))


def test_a_cast_giving_the_same_bits_stops_the_rerun(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An fp32 input, rounded at entry by sim:fp16 and by the cast on the Neural
    Engine's CPU: the cast gives sim:fp16's bits, so nothing past it runs again but the
    Neural Engine's own kernel, what its changed values reach, and the output cast its
    CPU stores in fp32."""

    @mb.program(input_specs=[mb.TensorSpec(shape=(1, C, 2), dtype=types.fp32)],
                opset_version=ct.target.iOS17)
    def cast_program(x):
        half = mb.cast(x=x, dtype="fp16", name="half")
        doubled = mb.mul(x=half, y=np.float16(2.0), name="doubled")
        soft = mb.softplus(x=doubled, name="soft")
        return mb.cast(x=mb.add(x=soft, y=doubled, name="total"), dtype="fp32", name="out")

    fp16, ane = _plans(cast_program)
    diff = diff_plans(fp16.plan, ane.plan)
    assert diff.entries == frozenset({"x"})
    assert diff.differing == {"soft": "kernel", "out": "output storage"}
    x = np.random.default_rng(1).normal(0, 3, (1, C, 2)).astype(np.float32)
    x[0, 0, 0] = 6.0  # doubled past ln 2^15: the Neural Engine's softplus collapses there
    inputs = {"x": x}
    base = fp16.evaluate(inputs)
    ran = _steps_run(monkeypatch)
    shared = ane.run_beside(base, diff, inputs, intermediates=True)
    monkeypatch.undo()
    assert ran == ["half", "soft", "total", "out"]
    _identical(shared, ane.run(inputs, intermediates=True))


def test_a_program_with_state_shares_nothing() -> None:
    fp16, ane = _plans(running_sum())
    assert not diff_plans(fp16.plan, ane.plan).shareable


def test_same_value_compares_bits() -> None:
    assert same_value(np.float32([0.0, np.nan]), np.float32([0.0, np.nan]))
    assert not same_value(np.float32([0.0]), np.float32([-0.0]))
    assert not same_value(np.float32([1.0]), np.float16([1.0]))
    assert same_value([np.int32(3), "x"], [np.int32(3), "x"])
    assert not same_value(np.zeros(2), [0.0, 0.0])

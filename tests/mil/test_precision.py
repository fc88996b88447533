"""Precision models: the registry, and each model's behaviour where the models differ."""

from __future__ import annotations

import numpy as np
import pytest

from nebisect.mil.interp import run_program
from nebisect.mil.precision import (
    get_precision,
    precision_names,
    round_to_fp16,
)
from nebisect.mil.quiet import import_coremltools

ct = import_coremltools()
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import types  # noqa: E402

OPSET = ct.target.iOS17


def test_the_registered_models():
    assert precision_names() == ["fp16", "fp16-naive", "fp32", "fp64"]
    model = get_precision("fp16")
    assert (model.compute, model.storage, model.rounds) == (np.float32, np.float16, True)
    assert get_precision("fp16-naive").variants == ("naive",)


@mb.program(input_specs=[mb.TensorSpec(shape=(3,))], opset_version=OPSET)
def _cast_round_trip(x):
    half = mb.cast(x=x, dtype="fp16")
    return mb.cast(x=mb.mul(x=half, y=np.float16(3.0)), dtype="fp32")


def test_fp64_treats_fp16_casts_as_identities_and_others_round():
    x = np.array([0.1, 1 / 3, 70000.0], np.float32)
    exact = x.astype(np.float64) * 3
    out = {p: run_program(_cast_round_trip, {"x": x}, p).outputs for p in precision_names()}
    (fp64,) = out["fp64"].values()
    (fp32,) = out["fp32"].values()
    (fp16,) = out["fp16"].values()
    assert fp64.dtype == np.float64 and fp32.dtype == np.float32 and fp16.dtype == np.float16
    np.testing.assert_array_equal(fp64, exact)
    np.testing.assert_array_equal(fp16[:2], (x[:2].astype(np.float16) * np.float16(3)))
    assert np.isinf(fp16[2])  # 70000 is past fp16's range once stored
    # fp32 honors the declared fp16 tensors (issue 15 item 4): the same rounding, fp32 out
    np.testing.assert_array_equal(fp32, fp16.astype(np.float32))


@mb.program(input_specs=[mb.TensorSpec(shape=(1, 4), dtype=types.fp16)], opset_version=OPSET)
def _softmax_lse(x):
    return mb.softmax(x=x, axis=-1), mb.reduce_log_sum_exp(x=x, axes=[-1])


def test_large_logits_pass_careful_fp16_and_overflow_fp16_naive():
    x = np.array([[12.0, 11.5, 0.0, -3.0]], np.float16)
    ref = x.astype(np.float64)
    lse_ref = np.log(np.exp(ref).sum())
    careful = list(run_program(_softmax_lse, {"x": x}, "fp16").outputs.values())
    naive = list(run_program(_softmax_lse, {"x": x}, "fp16-naive").outputs.values())
    oracle = list(run_program(_softmax_lse, {"x": x}, "fp64").outputs.values())
    assert oracle[1] == pytest.approx(lse_ref, rel=1e-15)
    np.testing.assert_allclose(careful[0], oracle[0], atol=1e-3)
    assert careful[1] == pytest.approx(lse_ref, rel=1e-3)
    assert np.isnan(naive[0][0, 0]) and np.isinf(naive[1])


@mb.program(input_specs=[mb.TensorSpec(shape=(1, 3000), dtype=types.fp16)], opset_version=OPSET)
def _sum(x):
    return mb.reduce_sum(x=x, axes=[1], name="total")


def test_fp16_accumulator_saturates_only_under_naive():
    ones = np.ones((1, 3000), np.float16)
    assert run_program(_sum, {"x": ones}, "fp16").outputs["total"][0] == 3000
    assert run_program(_sum, {"x": ones}, "fp16-naive").outputs["total"][0] == 2048


@mb.program(input_specs=[mb.TensorSpec(shape=(2,)), mb.TensorSpec(shape=(2,), dtype=types.int32)],
            opset_version=OPSET)
def _mixed(x, n):
    return mb.add(x=x, y=np.float32(1e-9)), mb.add(x=n, y=np.int32(1))


def test_fp32_loses_what_fp64_keeps_and_ints_are_untouched():
    x = np.array([1.0, 2.0], np.float32)
    n = np.array([100_001, -7], np.int32)
    for precision in precision_names():
        floats, ints = run_program(_mixed, {"x": x, "n": n}, precision).outputs.values()
        assert ints.dtype == np.int32
        np.testing.assert_array_equal(ints, [100_002, -6])  # not representable in fp16
        if precision == "fp64":
            assert floats[0] == 1.0 + np.float64(np.float32(1e-9))
        else:
            assert floats[0] == 1.0


def test_fp16_rounding_in_float32_is_bit_exact():
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 2**32, size=200_000, dtype=np.uint64).astype(np.uint32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65519.99, 65520, -65520,
                        2**-14, 2**-24, 2**-25, 3 * 2**-26, 1 + 2**-11, 1 + 3 * 2**-11], np.float32)
    x = np.concatenate([bits.view(np.float32), special,
                        np.array([0xFFFFFFFF, 0x7FFFFFFF], np.uint32).view(np.float32)])
    with np.errstate(all="ignore"):
        expected = x.astype(np.float16).astype(np.float32)
        got = round_to_fp16(x)
    same = (got.view(np.uint32) == expected.view(np.uint32)) | (np.isnan(got) & np.isnan(expected))
    assert same.all()


def test_fp16_results_are_float16_arrays_outputs_and_intermediates():
    x = np.array([[0.1, 1e-6, 3.0, -70000.0]], np.float16)
    result = run_program(_softmax_lse, {"x": x}, "fp16", intermediates=True)
    assert all(v.dtype == np.float16 for v in result.outputs.values())
    assert all(v.dtype == np.float16 for v in result.intermediates.values())


@pytest.mark.parametrize("threads", ["1", "2"])
def test_fp16_rounding_of_many_blocks_is_bit_exact_whatever_the_thread_count(
        monkeypatch, threads):
    monkeypatch.setenv("OMP_NUM_THREADS", threads)
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(300_001) * np.exp2(rng.integers(-30, 20, 300_001))).astype(np.float32)
    x = x.reshape(1, 300_001)
    with np.errstate(all="ignore"):
        expected = x.astype(np.float16).astype(np.float32)
    got = round_to_fp16(x)
    assert got.shape == x.shape
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))
    assert round_to_fp16(np.float32(1 / 3)).shape == ()


@mb.program(input_specs=[mb.TensorSpec(shape=(2, 3, 4))], opset_version=OPSET)
def _moved(x):
    scaled = mb.mul(x=x, y=np.float32(1 / 3))
    moved = mb.transpose(x=mb.reshape(x=scaled, shape=[6, 4]), perm=[1, 0])
    picked = mb.slice_by_index(x=moved, begin=[1, 0], end=[3, 6])
    return mb.concat(values=[picked, mb.sub(x=picked, y=np.float32(0.1))], axis=0)


def test_movement_ops_on_fp16_values_store_them_as_a_rounding_would(monkeypatch):
    """A movement op's output on the fp16 grid skips the rounding, with the same bits."""
    from nebisect.mil import plan
    from nebisect.mil.interp import CompiledProgram
    from nebisect.mil.semantics import DEFAULT_SEMANTICS, get_semantics
    from nebisect.mil.validate import input_specs

    function = _moved.functions["main"]

    def compiled() -> CompiledProgram:
        return CompiledProgram(plan.compile_function(
            function, "fp16", None, get_semantics(DEFAULT_SEMANTICS)), input_specs(function))

    skipping = compiled()
    monkeypatch.setattr(plan, "MOVEMENT_OPS", frozenset())
    rounding = compiled()
    on_grid = [[step.op_type for step in program.plan.main.steps
                if any(storage is not None and storage.on_grid
                       for _, storage, _ in step.outputs)]
               for program in (skipping, rounding)]
    assert on_grid == [["reshape", "transpose", "slice_by_index", "concat"], []]
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    skipped, rounded = (program.run({"x": x}, intermediates=True)
                        for program in (skipping, rounding))
    assert skipped.intermediates.keys() == rounded.intermediates.keys()
    assert len(rounded.intermediates) == 6
    for name, value in rounded.intermediates.items():
        assert value.dtype == np.float16
        np.testing.assert_array_equal(skipped.intermediates[name].view(np.uint16),
                                      value.view(np.uint16))


@mb.program(input_specs=[mb.TensorSpec(shape=(2, 3, 4)), mb.TensorSpec(shape=(2, 3, 4))],
            opset_version=OPSET)
def _picked(x, y):
    third = mb.mul(x=x, y=np.float32(1 / 3))
    larger = mb.maximum(x=third, y=y)
    chosen = mb.select(cond=mb.greater(x=x, y=y), a=larger, b=mb.relu(x=third))
    clipped = mb.clip(x=chosen, alpha=np.float32(-0.1), beta=np.float32(0.7))
    return mb.reduce_max(x=clipped, axes=[1]), mb.relu6(x=mb.add(x=y, y=np.float32(0.1)))


def test_picking_ops_on_fp16_values_store_them_as_a_rounding_would(monkeypatch):
    """An op that picks among its inputs' values (maximum, select, relu, clip,
    reduce_max) skips the rounding of values on the fp16 grid, with the same bits."""
    from nebisect.mil import plan
    from nebisect.mil.interp import CompiledProgram
    from nebisect.mil.semantics import DEFAULT_SEMANTICS, get_semantics
    from nebisect.mil.validate import input_specs

    function = _picked.functions["main"]

    def compiled() -> CompiledProgram:
        return CompiledProgram(plan.compile_function(
            function, "fp16", None, get_semantics(DEFAULT_SEMANTICS)), input_specs(function))

    skipping = compiled()
    monkeypatch.setattr(plan, "PICKING_OPS", {})
    rounding = compiled()
    on_grid = [[step.op_type for step in program.plan.main.steps
                if any(storage is not None and storage.on_grid
                       for _, storage, _ in step.outputs)]
               for program in (skipping, rounding)]
    assert on_grid == [["maximum", "relu", "select", "clip", "reduce_max", "relu6"], []]
    rng = np.random.default_rng(4)
    inputs = {name: (rng.standard_normal((2, 3, 4)) * 3).astype(np.float32)
              for name in ("x", "y")}
    skipped, rounded = (program.run(inputs, intermediates=True)
                        for program in (skipping, rounding))
    assert skipped.intermediates.keys() == rounded.intermediates.keys()
    assert len(rounded.intermediates) == 9
    for name, value in rounded.intermediates.items():
        same = skipped.intermediates[name]
        assert same.dtype == value.dtype
        if value.dtype == np.float16:
            np.testing.assert_array_equal(same.view(np.uint16), value.view(np.uint16))
        else:
            np.testing.assert_array_equal(same, value)

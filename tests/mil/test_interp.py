"""The interpreter: outputs, intermediates, input validation, control flow, plan cache."""

from __future__ import annotations

import numpy as np
import pytest

from nebisect.errors import NebisectError
from nebisect.mil import kernels
from nebisect.mil.interp import SimError, compile_program, run_program
from nebisect.mil.kernels import Kernel, KernelContext, MissingKernelError
from nebisect.mil.quiet import import_coremltools
from nebisect.mil.validate import InputError
from nebisect.registry import Registry

ct = import_coremltools()
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import get_new_symbol, types  # noqa: E402

OPSET = ct.target.iOS17


def _chain():
    @mb.program(input_specs=[mb.TensorSpec(shape=(2, 3))], opset_version=OPSET)
    def prog(x):
        r = mb.relu(x=x, name="r")
        m = mb.mul(x=r, y=np.float32(2.0), name="m")
        return mb.softmax(x=m, axis=-1, name="out")

    return prog


def test_outputs_intermediates_and_op_types():
    x = np.array([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]], np.float32)
    result = run_program(_chain(), {"x": x}, "fp64", intermediates=True)
    r = np.maximum(x.astype(np.float64), 0)
    e = np.exp(2 * r - (2 * r).max(-1, keepdims=True))
    np.testing.assert_allclose(result.outputs["out"], e / e.sum(-1, keepdims=True), rtol=1e-15)
    assert set(result.intermediates) == {"r", "m", "out"}
    np.testing.assert_array_equal(result.intermediates["r"], r)
    np.testing.assert_array_equal(result.intermediates["m"], 2 * r)
    assert result.op_types == {"r": "relu", "m": "mul", "out": "softmax"}
    assert result.placement == {}
    assert run_program(_chain(), {"x": x}).intermediates == {}


def _two_inputs():
    seq = get_new_symbol()

    @mb.program(
        input_specs=[
            mb.TensorSpec(shape=(1, seq, 4)),
            mb.TensorSpec(shape=(1, seq), dtype=types.int32),
        ],
        opset_version=OPSET,
    )
    def prog(x, mask):
        weights = mb.expand_dims(x=mb.cast(x=mask, dtype="fp32"), axes=[-1])
        return mb.reduce_sum(x=mb.mul(x=x, y=weights), axes=[1], name="pooled")

    return prog


def test_symbolic_dims_bind_from_the_inputs():
    prog = _two_inputs()
    for length in (1, 3, 7):
        x = np.arange(length * 4, dtype=np.float32).reshape(1, length, 4)
        mask = (np.arange(length) % 2 == 0).astype(np.int32)[None]
        out = run_program(prog, {"x": x, "mask": mask}, "fp32").outputs["pooled"]
        np.testing.assert_allclose(out, (x * mask[..., None]).sum(1))


@pytest.mark.parametrize(
    "inputs, message",
    [
        ({"x": np.zeros((1, 2, 4), np.float32)}, "missing input.* mask"),
        (
            {"x": np.zeros((1, 2, 4), np.float32), "mask": np.zeros((1, 2), np.int32),
             "extra": np.zeros(1)},
            "unknown input.* extra",
        ),
        ({"x": np.zeros((2, 4), np.float32), "mask": np.zeros((1, 2), np.int32)}, "rank 2"),
        ({"x": np.zeros((1, 2, 5), np.float32), "mask": np.zeros((1, 2), np.int32)},
         "size 5 on axis 2, the program expects 4"),
        ({"x": np.zeros((1, 2, 4), np.int32), "mask": np.zeros((1, 2), np.int32)},
         "must be a float array"),
        ({"x": np.zeros((1, 2, 4), np.float32), "mask": np.zeros((1, 2), np.float32)},
         "must be an integer array"),
        ({"x": np.zeros((1, 2, 4), np.float32), "mask": np.zeros((1, 3), np.int32)},
         "is 2 in another input"),
        ({"x": np.zeros((1, 2, 4), np.float32), "mask": np.full((1, 2), 2**40)},
         "outside the int32 range"),
    ],
)
def test_bad_inputs_are_one_line_errors(inputs, message):
    with pytest.raises(InputError, match=message) as info:
        run_program(_two_inputs(), inputs)
    assert isinstance(info.value, NebisectError) and "\n" not in str(info.value)


def test_int64_inputs_for_int32_are_accepted():
    x = np.ones((1, 2, 4), np.float32)
    out = run_program(_two_inputs(), {"x": x, "mask": np.ones((1, 2), np.int64)}).outputs
    np.testing.assert_array_equal(out["pooled"], [[2.0] * 4])


def test_range_and_enumerated_shapes_are_enforced():
    prog = _two_inputs()
    function = prog.functions["main"]
    function.input_types = (
        ct.TensorType(name="x", shape=ct.Shape((1, ct.RangeDim(2, 6), 4))),
    )
    ok = {"x": np.ones((1, 6, 4), np.float32), "mask": np.ones((1, 6), np.int32)}
    assert run_program(prog, ok).outputs["pooled"].shape == (1, 4)
    with pytest.raises(InputError, match=r"size 7 on axis 1, outside the flexible range 2\.\.6"):
        run_program(prog, {"x": np.ones((1, 7, 4), np.float32), "mask": np.ones((1, 7), np.int32)})
    function.input_types = (
        ct.TensorType(name="x", shape=ct.EnumeratedShapes(shapes=[(1, 2, 4), (1, 5, 4)])),
    )
    assert run_program(prog, ok | {"x": np.ones((1, 5, 4), np.float32),
                                    "mask": np.ones((1, 5), np.int32)}).outputs
    with pytest.raises(InputError, match=r"not one of the enumerated shapes.*\[1, 2, 4\]"):
        run_program(prog, {"x": np.ones((1, 3, 4), np.float32), "mask": np.ones((1, 3), np.int32)})


def test_cond_runs_the_branch_the_predicate_picks():
    @mb.program(input_specs=[mb.TensorSpec(shape=(3,))], opset_version=OPSET)
    def prog(x):
        pred = mb.greater(x=mb.reduce_sum(x=x), y=np.float32(0.0))
        return mb.cond(
            pred=pred,
            _true_fn=lambda: mb.mul(x=x, y=np.float32(10.0)),
            _false_fn=lambda: mb.sub(x=x, y=np.float32(1.0)),
            name="picked",
        )

    (name,) = prog.functions["main"].outputs
    positive = run_program(prog, {"x": np.array([1.0, 2.0, 3.0], np.float32)}).outputs
    negative = run_program(prog, {"x": np.array([-1.0, -2.0, 0.0], np.float32)}).outputs
    np.testing.assert_array_equal(positive[name.name], [10.0, 20.0, 30.0])
    np.testing.assert_array_equal(negative[name.name], [-2.0, -3.0, -1.0])


def test_while_loop_iterates_until_its_condition_fails():
    @mb.program(input_specs=[mb.TensorSpec(shape=(1,))], opset_version=OPSET)
    def prog(x):
        def cond(value, count):
            return mb.less(x=count, y=np.int32(5))

        def body(value, count):
            return mb.mul(x=value, y=np.float32(2.0)), mb.add(x=count, y=np.int32(1))

        return mb.while_loop(_cond=cond, _body=body, loop_vars=(x, np.int32(0)))

    result = run_program(prog, {"x": np.array([1.5], np.float32)}, "fp32")
    value, count = result.outputs.values()
    np.testing.assert_array_equal(value, [48.0])
    assert int(count) == 5


def _swap_kernels(monkeypatch, changes: dict[tuple[str, str], Kernel | None]) -> None:
    """Run the simulator with some kernels replaced (``None``: removed)."""
    swapped: Registry[tuple[str, str], Kernel] = Registry("kernel")
    for key, fn in kernels.KERNELS.items():
        replacement = changes.get(key, fn)
        if replacement is not None:
            swapped.register(key, replacement)
    monkeypatch.setattr(kernels, "KERNELS", swapped)


def test_an_op_without_a_kernel_is_a_clear_error(monkeypatch):
    _swap_kernels(monkeypatch, {("relu", ""): None})
    with pytest.raises(MissingKernelError, match="no kernel for MIL op 'relu'"):
        run_program(_chain(), {"x": np.zeros((2, 3), np.float32)})


def test_kernel_failures_and_wrong_shapes_name_the_op(monkeypatch):
    def wrong_shape(ctx: KernelContext, x, y):
        return np.zeros((5,))

    def broken(ctx: KernelContext, x, y):
        raise ValueError("operands could not be broadcast")

    _swap_kernels(monkeypatch, {("mul", ""): wrong_shape})
    with pytest.raises(SimError, match=r"op 'm' \(mul\) produced shape \[5\].*declares \[2, 3\]"):
        run_program(_chain(), {"x": np.zeros((2, 3), np.float32)})
    _swap_kernels(monkeypatch, {("mul", ""): broken})
    with pytest.raises(SimError, match=r"op 'm' \(mul\) failed: operands could not be broadcast"):
        run_program(_chain(), {"x": np.zeros((2, 3), np.float32)})


def test_plan_is_cached_until_the_program_changes():
    prog = _chain()
    first = compile_program(prog, "fp32")
    assert compile_program(prog, "fp32") is first
    assert compile_program(prog, "fp16") is not first
    function = prog.functions["main"]
    relu = function.find_ops(op_type="relu")[0]
    function.set_outputs([relu.outputs[0]])
    changed = compile_program(prog, "fp32")
    assert changed is not first
    out = changed.run({"x": np.array([[1.0, -2.0, 0.5]] * 2, np.float32)}).outputs
    np.testing.assert_array_equal(out["r"], [[1.0, 0.0, 0.5]] * 2)


def test_not_a_program_is_an_error():
    with pytest.raises(NebisectError, match="not a MIL program"):
        run_program(object(), {})


def test_lists_grow_inside_a_while_loop():
    """A list written once per iteration (as coremltools emits for TF/RNN loops)."""

    @mb.program(input_specs=[mb.TensorSpec(shape=(2,))], opset_version=OPSET)
    def prog(update):
        def cond(i, ls):
            return mb.less(x=i, y=np.int32(3))

        def body(i, ls):
            scaled = mb.mul(x=update, y=mb.cast(x=i, dtype="fp32"))
            return mb.add(x=i, y=np.int32(1)), mb.list_write(ls=ls, index=i, value=scaled)

        empty = mb.make_list(init_length=1, elem_shape=(2,))
        _, filled = mb.while_loop(_cond=cond, _body=body, loop_vars=(np.int32(0), empty))
        return (mb.list_gather(ls=filled, indices=[2, 0, 1], name="rows"),
                mb.list_length(ls=filled, name="length"),
                mb.list_read(ls=mb.list_write(ls=filled, index=5, value=update), index=4,
                             name="unwritten"))

    out = run_program(prog, {"update": np.array([1.0, -2.0], np.float32)}, "fp32").outputs
    np.testing.assert_array_equal(out["rows"], [[2.0, -4.0], [0.0, 0.0], [1.0, -2.0]])
    assert int(out["length"]) == 3
    np.testing.assert_array_equal(out["unwritten"], [0.0, 0.0])

"""meanpool-static-shape: seed 003's masked mean-pool gets a static (1, H) output.

The programs are built with coremltools' own ``expand`` lowering
(``pymil_broadcast_to``), so the pattern is exactly what the torch converter emits."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from nebisect.fixes import get_fix
from nebisect.mil.interp import SimPredictError, run_program
from nebisect.mil.quiet import import_coremltools

ct = import_coremltools()
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.frontend._utils import pymil_broadcast_to  # noqa: E402
from coremltools.converters.mil.mil import get_new_symbol, types  # noqa: E402

HIDDEN = 16
SEQ = get_new_symbol()
MASK_SEQ = get_new_symbol()


def meanpool_program(tail: Any = None, *, mask_length: Any = SEQ) -> Any:
    """tokens (1, S, H), mask (1, S) → Σ(tokens·mask) / clip(Σ mask) (seed 003's pool).

    ``mask_length=MASK_SEQ`` gives the mask its own symbol, as a loaded ``.mlpackage``
    does (its inputs carry independent ranges).
    """

    def body(tokens: Any, attention_mask: Any) -> Any:
        tokens16 = mb.cast(x=tokens, dtype="fp16")
        mask = mb.expand_dims(x=attention_mask, axes=[-1])
        expanded = pymil_broadcast_to(mask, mb.shape(x=tokens16), "expand")
        mask16 = mb.cast(x=expanded, dtype="fp16")
        if tail is not None:
            return tail(tokens16, mask16)
        summed = mb.reduce_sum(x=mb.mul(x=tokens16, y=mask16), axes=[1], keep_dims=False)
        count = mb.clip(x=mb.reduce_sum(x=mask16, axes=[1], keep_dims=False),
                        alpha=np.float16(6e-8), beta=np.float16(np.inf))
        return mb.real_div(x=summed, y=count)

    specs = [mb.TensorSpec(shape=(1, SEQ, HIDDEN), dtype=types.fp32),
             mb.TensorSpec(shape=(1, mask_length), dtype=types.int32)]
    return mb.program(input_specs=specs, opset_version=ct.target.iOS18)(body)


def op_types(prog: Any) -> Counter[str]:
    return Counter(op.op_type for op in prog.functions["main"].operations if op.op_type != "const")


def output_shape(prog: Any) -> tuple[Any, ...]:
    return tuple(prog.functions["main"].outputs[0].shape)


def inputs(length: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(length)
    mask = np.ones((1, length), np.int32)
    mask[0, length // 2:] = 0
    return {"tokens": rng.standard_normal((1, length, HIDDEN)).astype(np.float32),
            "attention_mask": mask}


def test_pooled_output_becomes_static_and_stays_exact() -> None:
    prog = meanpool_program()
    assert op_types(prog)["tile"] == 1
    assert any(not isinstance(d, int) for d in output_shape(prog)), "data-dependent before"
    before = {n: run_program(prog, inputs(n)).outputs for n in (2, 9)}
    with pytest.raises(SimPredictError, match="Data-dependent shapes were disabled"):
        run_program(prog, inputs(9), "fp16", profile="ane")

    assert get_fix("meanpool-static-shape").apply(prog) == 1
    assert "tile" not in op_types(prog)
    assert {"select", "real_div", "equal"} & set(op_types(prog)) == {"real_div"}
    assert output_shape(prog) == (1, HIDDEN)
    for n, outputs in before.items():
        after = run_program(prog, inputs(n)).outputs
        for name, value in outputs.items():
            np.testing.assert_array_equal(after[name], value)
    run_program(prog, inputs(9), "fp16", profile="ane")


def test_separate_input_lengths_are_tied_to_the_tokens_length() -> None:
    prog = meanpool_program(mask_length=MASK_SEQ)
    before = run_program(prog, inputs(7)).outputs
    assert get_fix("meanpool-static-shape").apply(prog) == 1
    types_after = op_types(prog)
    assert "tile" not in types_after and types_after["slice_by_size"] == 1
    assert output_shape(prog) == (1, HIDDEN)
    bound = {str(s) for var in prog.functions["main"].inputs.values() for s in var.shape}
    for op in prog.functions["main"].operations:
        for var in op.outputs:
            free = {str(s) for s in var.shape if not isinstance(s, int)} - bound
            assert not free, f"{var.name} {var.shape} has an unbound symbol"
    after = run_program(prog, inputs(7)).outputs
    for name, value in before.items():
        np.testing.assert_array_equal(after[name], value)
    run_program(prog, inputs(7), "fp16", profile="ane")


def test_constant_reps_are_not_touched() -> None:
    def body(x: Any) -> Any:
        return mb.mul(x=mb.tile(x=x, reps=[1, 1, HIDDEN]), y=np.ones((1, 4, HIDDEN), np.float32))

    prog = mb.program(input_specs=[mb.TensorSpec(shape=(1, 4, 1))],
                      opset_version=ct.target.iOS18)(body)
    assert get_fix("meanpool-static-shape").apply(prog) == 0
    assert op_types(prog)["tile"] == 1


@pytest.mark.parametrize(
    "tail",
    [
        pytest.param(lambda tokens, mask: mask, id="expanded-mask-is-an-output"),
        pytest.param(lambda tokens, mask: mb.reduce_sum(x=mask, axes=[2]),
                     id="sum-over-the-repeated-axis"),
        pytest.param(lambda tokens, mask: mb.mul(
            x=mb.reduce_max(x=tokens, axes=[2], keep_dims=True), y=mask),
            id="other-operand-does-not-cover-the-repeated-axis"),
        pytest.param(lambda tokens, mask: mb.transpose(x=mask, perm=[0, 2, 1]),
                     id="consumer-that-does-not-broadcast"),
    ],
)
def test_negative_patterns_are_untouched(tail: Any) -> None:
    prog = meanpool_program(tail)
    before = op_types(prog)
    assert get_fix("meanpool-static-shape").apply(prog) == 0
    assert op_types(prog) == before


def test_data_dependent_reps_outside_the_expand_idiom_are_untouched() -> None:
    def body(x: Any, reps: Any) -> Any:
        return mb.mul(x=mb.tile(x=x, reps=reps), y=np.float32(2))

    specs = [mb.TensorSpec(shape=(1, 4, 1)), mb.TensorSpec(shape=(3,), dtype=types.int32)]
    prog = mb.program(input_specs=specs, opset_version=ct.target.iOS18)(body)
    assert get_fix("meanpool-static-shape").apply(prog) == 0
    assert op_types(prog)["tile"] == 1

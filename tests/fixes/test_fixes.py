"""Graph fixes: one positive and several negative patterns each, op types before and after,
and numerics through the simulator (fp64 equivalence, the cliff gone under sim:ane)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from nebisect.fixes import get_fix, registered_fixes, resolve_fixes
from nebisect.mil.interp import run_program
from nebisect.mil.quiet import import_coremltools
from nebisect.oracle import compare

ct = import_coremltools()
from coremltools.converters.mil import Builder as mb  # noqa: E402
from coremltools.converters.mil.mil import types  # noqa: E402

FP16 = types.fp16


def program(shape: tuple[int, ...], body: Any, dtype: Any = FP16) -> Any:
    """A one-input program ``body(x)`` at iOS17 (fp16 graphs like converted models)."""
    return mb.program(input_specs=[mb.TensorSpec(shape=shape, dtype=dtype)],
                      opset_version=ct.target.iOS17)(body)


def op_types(prog: Any) -> Counter[str]:
    return Counter(op.op_type for op in prog.functions["main"].operations if op.op_type != "const")


def output_shapes(prog: Any) -> list[tuple[Any, ...]]:
    return [tuple(v.shape) for v in prog.functions["main"].outputs]


def assert_fp16_close(output: np.ndarray, exact: np.ndarray) -> None:
    """Within the oracle's fp16 tolerance (ULPs at the value plus a floor at the scale)."""
    comparison = compare("y", exact, output, "fp16")
    assert comparison.passed, comparison.detail


def run(prog: Any, x: np.ndarray, precision: str = "fp64", profile: str | None = None) -> Any:
    result = run_program(prog, {"x": x}, precision, profile=profile).outputs
    return next(iter(result.values()))


# --- registry --------------------------------------------------------------------------


def test_registry_lists_every_fix_with_level_and_claims() -> None:
    fixes = {n: f for n, f in registered_fixes().items() if not n.startswith("test-")}
    assert list(fixes) == sorted([
        "converter-compat", "log-softmax-stable", "logcumsumexp-stable",
        "logsumexp-max-shift", "meanpool-static-shape", "softplus-stable",
    ])
    assert fixes["converter-compat"].level == "convert"
    assert fixes["logsumexp-max-shift"].level == "graph"
    assert fixes["logsumexp-max-shift"].claims("mismatch:collapse")
    assert not fixes["logsumexp-max-shift"].claims("error:convert:x")
    assert fixes["meanpool-static-shape"].claims(
        "error:predict:SimPredictError: Invalid blob shape: Data-dependent shapes were disabled")
    assert all(cls.summary() for cls in fixes.values())


def test_resolving_a_fix_named_twice_gives_it_once() -> None:
    assert [f.name for f in resolve_fixes(["softplus-stable", "softplus-stable"])] == [
        "softplus-stable"
    ]


# --- logsumexp-max-shift ---------------------------------------------------------------


@pytest.mark.parametrize("keep", [True, False])
def test_logsumexp_is_shifted_keeping_keep_dims(keep: bool) -> None:
    prog = program((1, 32, 4), lambda x: mb.reduce_log_sum_exp(x=x, axes=[1], keep_dims=keep))
    assert op_types(prog) == {"reduce_log_sum_exp": 1}
    before = output_shapes(prog)
    x = np.full((1, 32, 4), 7.7, np.float32)
    x[0, :, 1] = np.linspace(-15, 15, 32)
    collapsed = run(prog, x, "fp16", "ane")

    assert get_fix("logsumexp-max-shift").apply(prog) == 1
    expected = {"reduce_max": 1, "sub": 1, "reduce_log_sum_exp": 1, "add": 1}
    assert op_types(prog) == (expected if keep else {**expected, "squeeze": 1})
    assert output_shapes(prog) == before
    exact = np.log(np.exp(x.astype(np.float64)).sum(axis=1, keepdims=keep))
    np.testing.assert_allclose(run(prog, x), exact, rtol=1e-12)
    assert np.abs(collapsed).min() == 0.0, "the profile collapses the unshifted op at 7.7"
    assert_fp16_close(run(prog, x, "fp16", "ane"), exact)


def test_logsumexp_shift_is_idempotent_and_reaches_nested_outputs() -> None:
    prog = program((2, 8), lambda x: mb.relu(x=mb.reduce_log_sum_exp(x=x, axes=[-1])))
    fix = get_fix("logsumexp-max-shift")
    assert fix.apply(prog) == 1
    assert fix.apply(prog) == 0
    assert op_types(prog)["reduce_log_sum_exp"] == 1


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(lambda x: mb.reduce_sum(x=x, axes=[1]), id="reduce_sum"),
        pytest.param(lambda x: mb.reduce_log_sum_exp(
            x=mb.sub(x=x, y=mb.reduce_max(x=x, axes=[1], keep_dims=True)), axes=[1]),
            id="already-shifted"),
        pytest.param(lambda x: mb.reduce_log_sum_exp(
            x=mb.cast(x=x, dtype="int32"), axes=[1]), id="integer-input"),
        pytest.param(lambda x: mb.add(x=x, y=mb.reduce_log_sum_exp(
            x=np.ones((1, 32, 4), np.float16), axes=[1], keep_dims=True)), id="constant-input"),
    ],
)
def test_logsumexp_negative_patterns_are_untouched(body: Any) -> None:
    prog = program((1, 32, 4), body)
    before = op_types(prog)
    assert get_fix("logsumexp-max-shift").apply(prog) == 0
    assert op_types(prog) == before


# --- softplus-stable -------------------------------------------------------------------


def test_softplus_becomes_the_stable_form() -> None:
    prog = program((1, 64), lambda x: mb.softplus(x=x))
    x = np.linspace(-15, 15, 64, dtype=np.float32).reshape(1, 64)
    assert run(prog, x, "fp16", "ane")[0, -1] == 0.0, "the profile's softplus cliff"

    assert get_fix("softplus-stable").apply(prog) == 1
    assert op_types(prog) == {"relu": 1, "abs": 1, "mul": 1, "exp": 1, "add": 2, "log": 1}
    exact = np.logaddexp(0.0, x.astype(np.float64))
    np.testing.assert_allclose(run(prog, x), exact, rtol=1e-12, atol=1e-15)
    assert_fp16_close(run(prog, x, "fp16", "ane"), exact)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(lambda x: mb.softplus_parametric(
            x=x, alpha=np.ones(4, np.float16), beta=np.ones(4, np.float16)), id="parametric"),
        pytest.param(lambda x: mb.sigmoid(x=x), id="sigmoid"),
        pytest.param(lambda x: mb.log(x=mb.add(x=mb.exp(x=x), y=np.float16(1))),
                     id="hand-written-softplus"),
    ],
)
def test_softplus_negative_patterns_are_untouched(body: Any) -> None:
    prog = program((1, 4, 2, 2), body)
    before = op_types(prog)
    assert get_fix("softplus-stable").apply(prog) == 0
    assert op_types(prog) == before


# --- log-softmax-stable ----------------------------------------------------------------


def test_log_softmax_is_computed_in_the_log_domain() -> None:
    prog = program((2, 5), lambda x: mb.log(x=mb.softmax(x=x, axis=-1)))
    x = np.array([[0, -20, 3, 1, -40], [10, 10, 10, 10, 10]], np.float32)
    assert not np.isfinite(run(prog, x, "fp16")).all(), "fp16 softmax underflows to log 0"

    assert get_fix("log-softmax-stable").apply(prog) == 1
    assert op_types(prog) == {"reduce_max": 1, "sub": 2, "exp": 1, "reduce_sum": 1, "log": 1}
    shifted = x.astype(np.float64) - x.max(axis=-1, keepdims=True)
    exact = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(run(prog, x), exact, rtol=1e-12)
    assert_fp16_close(run(prog, x, "fp16"), exact)


def test_log_softmax_keeps_a_shared_softmax() -> None:
    prog = program((2, 5), lambda x: (mb.softmax(x=x, axis=0), mb.log(x=mb.softmax(x=x, axis=0))))
    assert get_fix("log-softmax-stable").apply(prog) == 1
    assert op_types(prog)["softmax"] == 1
    assert op_types(prog)["reduce_max"] == 1


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(lambda x: mb.softmax(x=x, axis=-1), id="softmax-alone"),
        pytest.param(lambda x: mb.log(x=mb.sigmoid(x=x)), id="log-sigmoid"),
        pytest.param(lambda x: mb.log(x=mb.softmax(x=x, axis=-1), epsilon=np.float16(1e-3)),
                     id="real-epsilon"),
        pytest.param(lambda x: mb.log(x=mb.abs(x=x)), id="plain-log"),
    ],
)
def test_log_softmax_negative_patterns_are_untouched(body: Any) -> None:
    prog = program((2, 5), body)
    before = op_types(prog)
    assert get_fix("log-softmax-stable").apply(prog) == 0
    assert op_types(prog) == before


# --- logcumsumexp-stable ---------------------------------------------------------------


@pytest.mark.parametrize("reverse", [False, True])
def test_logcumsumexp_is_shifted_with_flags_kept(reverse: bool) -> None:
    prog = program((2, 6), lambda x: mb.log(x=mb.cumsum(x=mb.exp(x=x), axis=1, reverse=reverse)))
    x = np.array([[1, 12, 3, 14, -2, 0], [0, 0, 0, 0, 0, 0]], np.float32)
    assert not np.isfinite(run(prog, x, "fp16")).all(), "exp(12) overflows fp16"

    assert get_fix("logcumsumexp-stable").apply(prog) == 1
    assert op_types(prog) == {"reduce_max": 1, "sub": 1, "exp": 1, "cumsum": 1, "log": 1,
                              "add": 1}
    cumsum = next(op for op in prog.functions["main"].operations if op.op_type == "cumsum")
    assert bool(cumsum.reverse.val) is reverse
    values = x.astype(np.float64)[:, ::-1] if reverse else x.astype(np.float64)
    exact = np.logaddexp.accumulate(values, axis=1)
    exact = exact[:, ::-1] if reverse else exact
    np.testing.assert_allclose(run(prog, x), exact, rtol=1e-12)
    assert_fp16_close(run(prog, x, "fp16"), exact)


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(lambda x: mb.log(x=mb.cumsum(x=mb.abs(x=x), axis=1)), id="no-exp"),
        pytest.param(lambda x: mb.cumsum(x=mb.exp(x=x), axis=1), id="no-log"),
        pytest.param(lambda x: mb.log(x=mb.reduce_sum(x=mb.exp(x=x), axes=[1])), id="not-cumsum"),
        pytest.param(lambda x: mb.log(x=mb.cumsum(x=mb.exp(x=x), axis=1), epsilon=np.float16(0.5)),
                     id="real-epsilon"),
    ],
)
def test_logcumsumexp_negative_patterns_are_untouched(body: Any) -> None:
    prog = program((2, 6), body)
    before = op_types(prog)
    assert get_fix("logcumsumexp-stable").apply(prog) == 0
    assert op_types(prog) == before


# --- converter-compat ------------------------------------------------------------------


def test_converter_compat_is_active_only_inside_its_context() -> None:
    from nebisect.sources import converter_overrides

    fix = get_fix("converter-compat")
    assert not converter_overrides.installed()
    with fix.active():
        assert converter_overrides.installed()
    assert not converter_overrides.installed()

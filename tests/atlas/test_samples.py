"""OpInfo samples as one-op torch sources, and the sweep's plan of them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nebisect.atlas.plan import parse_dtypes, plan
from nebisect.atlas.samples import OpSample, first_of_each_form
from nebisect.errors import NebisectError


@pytest.fixture(scope="module")
def var_samples() -> list[OpSample]:
    return plan(["var"], ["float32"]).samples


def _module_of(sample: OpSample) -> dict:
    namespace: dict = {}
    exec(compile(sample.source_text(), sample.name, "exec"), namespace)
    return namespace["model"]()


def test_every_call_form_of_var_is_one_sample_with_its_keywords_baked_in(
        var_samples: list[OpSample]) -> None:
    calls = [s.call for s in var_samples if not s.values]
    # 17 OpInfo samples: 2 rank-0, 1 repeated form; 13 moved along a mutation axis
    assert len(calls) == len(set(calls)) == 14 + 13
    # and each of the 14 with -inf at every other element of its input
    assert len([s for s in var_samples if s.values == "neg-inf"]) == 14
    assert "torch.var(x0, dim=(1,), correction=2)" in calls  # coremltools PR #2718's form
    assert "torch.var(x0)" in calls
    assert all(list(s.inputs) == ["x0"] for s in var_samples)


def test_samples_are_moved_to_dims_from_the_end_and_flipped_booleans() -> None:
    """OpInfo has cumsum along dims 0 and 1 only, and avg_pool2d's flags as given: the
    sweep also judges ``cumsum(x, -2)`` and each flag flipped (named by the ATen
    schema, positional or not), and an int32 sample of a form float32 also has."""
    cumsum = {s.index: s.call for s in plan(["cumsum"], ["float32"]).samples}
    assert cumsum["float32:1:neg-dims"] == "torch.cumsum(x0, -2)"
    pool = {s.index: s.call for s in plan(["nn.functional.avg_pool2d"], ["float32"]).samples}
    assert pool["float32:0"] == "torch.nn.functional.avg_pool2d(x0, 3, 1, 1, True, False, 2)"
    assert pool["float32:0:flip-ceil_mode"] == (
        "torch.nn.functional.avg_pool2d(x0, 3, 1, 1, False, False, 2)")
    assert pool["float32:0:flip-count_include_pad"] == (
        "torch.nn.functional.avg_pool2d(x0, 3, 1, 1, True, True, 2)")
    mm = plan(["mm"], ["float32", "int32"]).samples
    assert [(s.index, s.call) for s in mm] == [("float32:0", "torch.mm(x0, x1)"),
                                               ("float32:0:neg-inf", "torch.mm(x0, x1)"),
                                               ("int32:0", "torch.mm(x0, x1)")]
    covered = plan(["cumsum", "nn.functional.avg_pool2d", "remainder"],
                   ["float32", "int32"]).covered
    assert covered == {  # avg_pool2d has no int32 sample: OpInfo lists no int32 for it
        "cumsum": ["float32", "int32", "neg-dims", "neg-inf"],
        "nn.functional.avg_pool2d": ["float32", "flip-ceil_mode", "flip-count_include_pad",
                                     "neg-inf"],
        "remainder": ["float32", "int32", "one", "neg-inf"]}


def test_a_window_is_started_from_the_end_and_an_input_given_minus_infinity() -> None:
    """coremltools PR #2774 (``narrow`` with a negative start reaching the end: its end,
    0, read as the first index) and PR #2771 (``triu(x, 2)`` as ``x - band_part(x)``:
    -inf - -inf is NaN) — neither in OpInfo's samples as given."""
    narrow = {s.index: s for s in plan(["narrow"], ["float32"]).samples}
    assert narrow["float32:8"].call == "torch.narrow(x0, 2, 1, 2)"
    assert narrow["float32:8:neg-start"].call == "torch.narrow(x0, 2, -2, 2)"
    assert "float32:4:neg-start" not in narrow  # an empty window: no start to move
    triu = {s.index: s for s in plan(["triu"], ["float32"]).samples}
    moved, given = triu["float32:1:neg-inf"], triu["float32:1"]
    assert moved.call == given.call == "torch.triu(x0, 2)" and moved.form != given.form
    flat = moved.inputs["x0"].reshape(-1)
    assert np.isneginf(flat[::2]).all()
    np.testing.assert_array_equal(flat[1::2], given.inputs["x0"].reshape(-1)[1::2])
    assert "float('-inf')" in moved.source_text()
    written = _module_of(moved)
    assert torch.equal(written["example_inputs"]["x0"], torch.from_numpy(moved.inputs["x0"]))


def test_the_written_source_computes_what_torch_computes_at_the_samples_values(
        var_samples: list[OpSample]) -> None:
    sample = next(s for s in var_samples if "correction=2" in s.call)
    built = _module_of(sample)
    x = built["example_inputs"]["x0"]
    np.testing.assert_array_equal(x.numpy(), sample.inputs["x0"])  # exact values
    expected = torch.var(torch.from_numpy(sample.inputs["x0"]), dim=(1,), correction=2)
    assert torch.equal(built["module"](x), expected)


def test_rank0_arguments_become_constants_and_a_variant_sets_them_to_one() -> None:
    samples = plan(["remainder"], ["float32"]).samples
    calls = [s.call for s in samples]
    assert "torch.remainder(x0, torch.tensor(1, dtype=torch.float32))" in calls
    one = next(s for s in samples if s.index.endswith(":one"))
    assert one.name == "remainder-float32-1-one"
    assert _module_of(one)["module"](torch.tensor([2.5, -0.25])).tolist() == [0.5, 0.75]


def test_what_cannot_be_a_core_ml_input_is_a_reason_not_a_sample() -> None:
    planned = plan(["reciprocal"], ["float32"])
    assert [s.call for s in planned.samples if not s.values] == ["torch.reciprocal(x0)"]
    assert planned.unsampled["reciprocal"] == [
        "reciprocal sample float32:1: rank-0 or empty tensor",
        "reciprocal sample float32:2: rank-0 or empty tensor"]


def test_integer_samples_exist_only_for_ops_that_support_the_dtype() -> None:
    planned = plan(["floor_divide", "nn.functional.gelu"], ["int32"])
    assert {s.op_name for s in planned.samples} == {"floor_divide"}
    assert all(a.dtype == np.int32 for s in planned.samples for a in s.inputs.values())


def test_first_of_each_form_keeps_order() -> None:
    a = OpSample("op", "", "float32:0", "torch.op(x0)", {"x0": np.zeros(2)})
    b = OpSample("op", "", "float32:1", "torch.op(x0)", {"x0": np.ones(3)})
    c = OpSample("op", "", "float32:2", "torch.op(x0, 1)", {"x0": np.ones(3)})
    d = OpSample("op", "", "int32:0", "torch.op(x0)", {"x0": np.ones(3, np.int32)})
    assert first_of_each_form([a, b, c, d]) == [a, c, d]


@pytest.mark.parametrize(("names", "message"), [
    (["no_such_op"], "--ops: 'no_such_op' not in torch's op database"),
    (["vra"], "(did you mean var"),
])
def test_an_unknown_op_is_one_line_naming_the_nearest(names: list[str], message: str) -> None:
    with pytest.raises(NebisectError, match=None) as raised:
        plan(names, ["float32"])
    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_dtypes_are_checked() -> None:
    assert parse_dtypes("float32, int32,float32") == ("float32", "int32")
    with pytest.raises(NebisectError, match="--dtypes 'float99'"):
        parse_dtypes("float99")


def test_smaller_cuts_one_axis_of_one_input_at_a_time() -> None:
    sample = OpSample("add", "", "float32:0", "torch.add(x0, x1)",
                      {"x0": np.zeros((4, 3)), "x1": np.zeros((3,))})
    cuts = [(c.inputs["x0"].shape, c.inputs["x1"].shape, c.index) for c in sample.smaller()]
    assert cuts == [((1, 3), (3,), "float32:0:shrunk"), ((2, 3), (3,), "float32:0:shrunk"),
                    ((4, 1), (3,), "float32:0:shrunk"), ((4, 2), (3,), "float32:0:shrunk"),
                    ((4, 3), (1,), "float32:0:shrunk"), ((4, 3), (2,), "float32:0:shrunk")]


def test_shrink_takes_the_first_smaller_sample_that_still_fails_within_its_budget() -> None:
    from nebisect.atlas.sweep import shrink

    sample = OpSample("exp", "", "float32:0", "torch.exp(x0)", {"x0": np.zeros((4, 4))})
    tried: list[tuple[int, ...]] = []

    def still_fails(candidate: OpSample) -> bool:  # fails while the first axis is > 1
        tried.append(candidate.inputs["x0"].shape)
        return candidate.inputs["x0"].shape[0] > 1

    assert shrink(sample, still_fails, 10).inputs["x0"].shape == (2, 1)
    assert tried == [(1, 4), (2, 4), (1, 4), (2, 1), (1, 1)]
    tried.clear()
    assert shrink(sample, still_fails, 1).inputs["x0"].shape == (4, 4)  # (1, 4) passed
    assert tried == [(1, 4)]

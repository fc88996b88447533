"""Value families: the registry, and members with the dtypes, shapes and exact values they
promise (delta-replicated fills, −0's sign bit, real fp16 subnormals, 0/1 masks)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nebisect.errors import NebisectError
from nebisect.inputs.families import (
    FAMILIES,
    Family,
    ModelInputs,
    ParametricFamily,
    build,
    default_names,
    listing,
)
from nebisect.inputs.families.base import breadth_first
from nebisect.registry import Registry
from nebisect.sources.domains import RANGE, InputDomain
from nebisect.sources.inputs import InputDescription

ALL = {"const", "normal", "spike", "special", "zeros", "masks", "tokens", "signed", "tiny",
       "integers", "bigints", "lengths"}
FLOAT_FAMILIES = {"const", "normal", "spike", "special", "zeros", "signed", "tiny", "integers"}
FP16_TINY = float(np.finfo(np.float16).tiny)  # 2^-14, the smallest normal


def image_model(dtype: str = "float32", example: float | None = 2.5, side: int = 8) -> ModelInputs:
    shape = (1, 1, side, side)
    given = None if example is None else {"x": np.full(shape, example, dtype=dtype)}
    return ModelInputs([InputDescription("x", dtype, [(n, n) for n in shape])], example=given)


def text_model(vocab_size: int | None = None) -> ModelInputs:
    dims = [(1, 1), (1, 64)]
    return ModelInputs([
        InputDescription("input_ids", "int32", dims),
        InputDescription("attention_mask", "int32", dims),
        InputDescription("token_type_ids", "int32", dims),
        InputDescription("scores", "float16", dims),
    ], lengths=(8,), vocab_size=vocab_size)


def family(name: str, inputs: ModelInputs, seed: int = 0) -> Family:
    return build(inputs, [name], seed)[0]


def test_registry_lists_every_family_once_with_a_one_line_description() -> None:
    rows = listing()
    assert {name for name, _ in rows} == ALL == set(FAMILIES.names())
    assert [name for name, _ in rows] == default_names()
    assert default_names()[0] == "const"  # seed 000's family is reached first
    for name, description in rows:
        assert description and "\n" not in description, name


def test_building_an_unknown_family_is_a_user_error() -> None:
    with pytest.raises(NebisectError, match=r"unknown value family 'cnst' \(did you mean const"):
        build(image_model(), ["cnst"])


def test_the_registry_class_rejects_duplicates_and_loads_before_reading() -> None:
    loads: list[int] = []
    registry: Registry[str, int] = Registry("widget", lambda: loads.append(1))
    registry.register("b", 2)
    registry.register("a", 1)
    with pytest.raises(ValueError, match="widget 'a' registered twice"):
        registry.register("a", 3)
    assert registry.items() == [("a", 1), ("b", 2)] and "a" in registry
    assert registry.get("b") == 2 and loads


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_every_member_keeps_each_input_dtype_and_shape(dtype: str) -> None:
    inputs = image_model(dtype)
    for built in build(inputs, seed=3):
        members = list(built.members())
        assert (len(members) > 0) == (built.name in FLOAT_FAMILIES), built.name
        assert len({m.label for m in members}) == len(members)
        for member in members:
            assert member.member.family == built.name
            assert member.arrays["x"].dtype == np.dtype(dtype)
            assert member.arrays["x"].shape == (1, 1, 8, 8)


def test_constant_fill_is_delta_replicated_at_any_x() -> None:
    const = family("const", image_model())
    assert isinstance(const, ParametricFamily)
    at = const.inputs_at(7.625)
    assert at.label == "const(x=7.625)" and at.member.x == 7.625
    assert np.all(at.arrays["x"] == np.float32(7.625))
    plan = const.plan()
    assert len(plan) == 60 and plan[:3] == ["const(x=1.0)", "const(x=-1.0)", "const(x=32768.0)"]
    xs = [m.member.x for m in const.members()]
    assert sorted(abs(x) for x in xs if x is not None)[::2] == [2.0**k for k in range(-14, 16)]


def test_special_values_are_exact_with_the_sign_of_minus_zero() -> None:
    special = {m.label: m.arrays["x"] for m in family("special", image_model()).members()}
    minus_zero = special["special(fill=-0)"]
    assert np.all(minus_zero == 0) and np.all(np.signbit(minus_zero))
    assert not np.any(np.signbit(special["special(fill=0)"]))
    assert np.all(special["special(fill=inf)"] == np.inf)
    assert np.all(special["special(fill=-inf)"] == -np.inf)
    assert np.all(np.isnan(special["special(fill=nan)"]))
    one = special["special(one=nan)"]
    assert np.count_nonzero(np.isnan(one)) == 1 and np.all(one[~np.isnan(one)] == 2.5)
    assert np.count_nonzero(special["special(one=-inf)"] == -np.inf) == 1


def test_tiny_members_are_real_fp16_subnormals_down_to_the_smallest() -> None:
    tiny = list(family("tiny", image_model()).members())
    assert {m.member.x for m in tiny} == {2.0**k for k in range(-24, -13)}
    for member in tiny:
        values = member.arrays["x"].astype(np.float16)
        assert np.all(values.astype(np.float32) == member.arrays["x"])  # exact in fp16
        magnitude = np.abs(values.astype(np.float64))
        assert np.all(magnitude == member.member.x)
        if member.member.x is not None and member.member.x < FP16_TINY:
            assert np.all((magnitude > 0) & (magnitude < FP16_TINY))  # subnormal, not 0
    assert any(m.member.x == 2.0**-24 for m in tiny)


def test_one_signed_inputs_are_strictly_one_signed_in_fp16() -> None:
    for member in family("signed", image_model("float16")).members():
        values = member.arrays["x"]
        x = member.member.x
        assert x is not None and np.all(np.isfinite(values))
        assert np.all(values > 0) if x > 0 else np.all(values < 0)


def test_scaled_normals_span_the_fp16_range_and_stay_finite() -> None:
    normal = list(family("normal", image_model("float16", side=32)).members())
    assert {m.member.x for m in normal} == {2.0**k for k in range(-14, 16)}
    unit = next(m for m in normal if m.member.x == 1.0).arrays["x"].astype(np.float64)
    big = next(m for m in normal if m.member.x == 2.0**15).arrays["x"]
    assert np.all(np.isfinite(big)) and np.abs(big).max() == 65504  # clipped
    assert 0.5 < unit.std() < 2 and len(np.unique(unit)) > 32


def test_zero_slices_zero_exactly_the_named_rows_and_columns() -> None:
    zeros = {m.label: m.arrays["x"][0, 0] for m in family("zeros", image_model()).members()}
    assert np.all(zeros["zeros(tensor)"] == 0)
    for label, zeroed in (("zeros(row=first)", np.s_[0, :]), ("zeros(row=last)", np.s_[-1, :]),
                          ("zeros(column=first)", np.s_[:, 0]),
                          ("zeros(column=last)", np.s_[:, -1])):
        array = zeros[label]
        assert np.all(array[zeroed] == 0) and np.count_nonzero(array == 0) == 8, label


def test_spike_sets_one_element_over_the_example_background() -> None:
    spike = family("spike", image_model())
    assert isinstance(spike, ParametricFamily)
    values = spike.inputs_at(-300.0).arrays["x"]
    assert np.count_nonzero(values == -300.0) == 1 and np.count_nonzero(values == 2.5) == 63
    assert spike.inputs_at(-300.0).member.magnitude == 300.0


def test_integers_and_halves_are_exact() -> None:
    for member in family("integers", image_model()).members():
        values = member.arrays["x"].astype(np.float64)
        step = 1.0 if member.label.startswith("integers") else 0.5
        assert np.all(values / step == np.rint(values / step)), member.label
    halves = next(m for m in family("integers", image_model()).members()
                  if m.label == "halves(scale=16)")
    assert np.any(halves.arrays["x"] % 1 == 0.5)


def test_masks_are_zero_one_patterns_recognised_by_name_or_by_example_values() -> None:
    inputs = text_model()
    assert inputs.names("mask") == ["attention_mask"]
    assert inputs.names("tokens") == ["input_ids"] and inputs.names("fixed") == ["token_type_ids"]
    masks_family = family("masks", inputs)
    masks = {label: masks_family.materialize(label).arrays["attention_mask"]
             for label in masks_family.plan()}
    assert set(masks) == {"mask(ones)", "mask(zeros)", "mask(left-padded)", "mask(right-padded)"}
    # an all-zero mask is no input a model takes: exploration never visits it
    assert not masks_family.materialize("mask(zeros)").admissible
    assert {m.label for m in masks_family.members()} == set(masks) - {"mask(zeros)"}
    assert masks["mask(ones)"].tolist() == [[1] * 8] and masks["mask(zeros)"].tolist() == [[0] * 8]
    assert masks["mask(left-padded)"].tolist() == [[0, 0, 0, 0, 1, 1, 1, 1]]
    assert masks["mask(right-padded)"].tolist() == [[1, 1, 1, 1, 0, 0, 0, 0]]
    assert all(m.dtype == np.int32 for m in masks.values())
    unnamed = ModelInputs([InputDescription("valid", "int32", [(1, 1), (4, 4)])],
                          example={"valid": np.array([[1, 1, 0, 1]], dtype=np.int32)})
    assert unnamed.names("mask") == ["valid"]
    flags = ModelInputs([InputDescription("keep", "bool", [(4, 4)])])
    assert flags.names("mask") == ["keep"]
    assert [m.arrays["keep"].tolist() for m in family("masks", flags).members()][1] == [
        False, False, True, True]


def test_token_ids_stay_inside_the_vocabulary_and_other_ids_keep_their_values() -> None:
    inputs = text_model(vocab_size=30)
    base = inputs.base(0)
    members = {m.label: m.arrays for m in family("tokens", inputs).members()}
    for arrays in members.values():
        assert arrays["input_ids"].min() >= 0 and arrays["input_ids"].max() < 30
        assert np.array_equal(arrays["token_type_ids"], base["token_type_ids"])
        assert np.array_equal(arrays["attention_mask"], base["attention_mask"])
    assert np.all(members["tokens(last)"]["input_ids"] == 29)
    assert np.all(members["tokens(first)"]["input_ids"] == 0)
    example = {"input_ids": np.array([[5, 17]], dtype=np.int32)}
    bounded = ModelInputs([InputDescription("input_ids", "int32", [(1, 1), (2, 2)])], example)
    assert bounded.token_range()[1] == 18


def test_large_integers_reach_float32s_edge_where_the_declared_domain_allows() -> None:
    """Issue #23: 2^24 + 1 is the first integer float32 cannot hold; an integer input
    takes it only when its declared domain says so (undeclared ids stay ids)."""
    desc = [InputDescription("x", "int32", [(1, 1), (4, 4)])]
    example = {"x": np.array([[2, 3, 4, 5]], np.int32)}
    assert family("bigints", ModelInputs(desc, example)).plan() == []
    wide = ModelInputs(desc, example, domains={"x": InputDomain(RANGE, 0, 2**31 - 1)})
    members = {m.label: m for m in family("bigints", wide).members()}
    assert list(members) == ["bigints(x=16777216)", "bigints(x=16777217)",
                             "bigints(x=2147483647)"]
    edge = members["bigints(x=16777217)"]
    assert edge.arrays["x"].dtype == np.int32 and np.all(edge.arrays["x"] == 2**24 + 1)
    assert edge.member.magnitude == 2**24 + 1
    narrow = ModelInputs(desc, example, domains={"x": InputDomain(RANGE, -(2**40), 2**20)})
    assert family("bigints", narrow).plan() == ["bigints(x=-16777217)", "bigints(x=-2147483648)"]


def test_a_signed_integer_example_is_arithmetic_and_takes_large_integers() -> None:
    """An undeclared integer input whose example holds a negative value is no token id
    (ids, indices and counts are never negative): it takes every large integer its dtype
    holds; a non-negative one beside it (a divisor of 2) takes none."""
    desc = [InputDescription("x", "int32", [(1, 1), (4, 4)]),
            InputDescription("y", "int32", [(1, 1), (4, 4)])]
    example = {"x": np.array([[10, -10, 7, -7]], np.int32), "y": np.full((1, 4), 2, np.int32)}
    members = {m.label: m.arrays for m in family("bigints", ModelInputs(desc, example)).members()}
    assert list(members) == ["bigints(x=16777216)", "bigints(x=16777217)",
                             "bigints(x=2147483647)", "bigints(x=-16777217)",
                             "bigints(x=-2147483648)"]
    assert all(np.array_equal(arrays["y"], example["y"]) for arrays in members.values())


def test_lengths_cover_the_requested_lengths_and_both_range_ends() -> None:
    inputs = text_model()
    lengths = {m.label: m for m in family("lengths", inputs).members()}
    assert set(lengths) == {"length(8)", "length(1)", "length(64)"}
    assert lengths["length(64)"].arrays["input_ids"].shape == (1, 64)
    assert lengths["length(1)"].member.magnitude == 1
    assert family("lengths", image_model()).plan() == []


def test_lengths_draw_token_ids_inside_the_range_the_example_uses() -> None:
    """MobileBERT's Embedding(100) got id 850 at every generated length: an error
    finding on every target but sim:fp64, from nebisect's own input."""
    example = {"input_ids": np.array([[3, 97, 12, 40, 5, 60, 7, 8]], np.int32),
               "attention_mask": np.ones((1, 8), np.int32),
               "token_type_ids": np.zeros((1, 8), np.int32),
               "scores": np.zeros((1, 8), np.float16)}
    inputs = ModelInputs(text_model().descriptions, example=example, lengths=(8,))
    members = list(family("lengths", inputs).members())
    assert [m.label for m in members] == ["length(8)", "length(1)", "length(64)"]
    assert all(m.arrays["input_ids"].min() >= 0 and m.arrays["input_ids"].max() <= 97
               for m in members)
    assert members[2].arrays["input_ids"].max() > 50  # spread over the ids, not piled on 0


def test_same_seed_same_members_and_another_seed_other_draws() -> None:
    def draws(seed: int) -> list[bytes]:
        return [m.arrays["x"].tobytes() for f in build(image_model(example=None), seed=seed)
                for m in f.members()]

    assert draws(5) == draws(5)
    assert draws(5) != draws(6)


def test_breadth_first_puts_both_ends_before_the_middle() -> None:
    order = breadth_first([float(v) for v in range(9)], start=4.0)
    assert order[:3] == [4.0, 8.0, 0.0] and sorted(order) == [float(v) for v in range(9)]
    assert order.index(2.0) < order.index(1.0) and math.isclose(order[3], 2.0)

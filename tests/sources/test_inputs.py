"""Input descriptions: lengths inside ranges, generated values, checks of given inputs."""

from __future__ import annotations

import numpy as np
import pytest

from nebisect.errors import NebisectError
from nebisect.sources.inputs import InputDescription, check, generate, lengths_for

TOKENS = InputDescription("tokens", "float32", [(1, 1), (1, 382), (16, 16)])
MASK = InputDescription("attention_mask", "int32", [(1, 1), (1, 382)])


def test_default_lengths_clip_into_range() -> None:
    assert lengths_for([TOKENS, MASK], (2, 8, 37, 128, 380)) == [2, 8, 37, 128, 380]
    narrow = InputDescription("x", "float32", [(1, 1), (4, 64)])
    assert lengths_for([narrow], (2, 8, 37, 128, 380)) == [4, 8, 37, 64]
    static = InputDescription("x", "float32", [(1, 1), (8, 8)])
    assert lengths_for([static], (2, 8)) == [0]


def test_generated_inputs_fit_and_masks_have_zeros() -> None:
    arrays = generate([TOKENS, MASK], 8)
    assert arrays["tokens"].shape == (1, 8, 16) and arrays["tokens"].dtype == np.float32
    assert arrays["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 1, 0, 0]]
    check([TOKENS, MASK], arrays)
    again = generate([TOKENS, MASK], 8)
    assert np.array_equal(again["tokens"], arrays["tokens"])


def test_token_ids_are_valid_integers() -> None:
    ids = generate([InputDescription("input_ids", "int32", [(1, 1), (1, 64)])], 37)["input_ids"]
    assert ids.shape == (1, 37) and ids.min() >= 1 and ids.max() < 1000


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"tokens": np.zeros((1, 8, 16), np.float32)}, "missing \\['attention_mask'\\]"),
        ({"tokens": np.zeros((1, 8, 16), np.float32), "attention_mask": np.ones((1, 8), np.int32),
          "extra": np.zeros(1)}, "unexpected \\['extra'\\]"),
        ({"tokens": np.zeros((1, 400, 16), np.float32),
          "attention_mask": np.ones((1, 8), np.int32)},
         "shape \\[1, 400, 16\\]"),
        ({"tokens": np.zeros((1, 8, 16), np.int32), "attention_mask": np.ones((1, 8), np.int32)},
         "dtype int32"),
    ],
)
def test_bad_inputs_name_the_problem(arrays: dict[str, np.ndarray], message: str) -> None:
    with pytest.raises(NebisectError, match=message):
        check([TOKENS, MASK], arrays)


def test_description_round_trip() -> None:
    assert InputDescription.from_dict(TOKENS.to_dict()) == TOKENS

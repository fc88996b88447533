"""A torch.export constraint violation keeps its condition in the one-line conversion
failure (MobileBERT's slice needs a length other than 2)."""

from __future__ import annotations

import pytest

from nebisect.sources.convert import converter_message
from nebisect.sources.export_guards import violated_condition

#: torch 2.13's message for MobileBERT exported with ``seq = Dim("seq", min=1, max=64)``
MOBILEBERT = (
    "Constraints violated (seq)! For more information, run with TORCH_LOGS=\"+dynamic\".\n"
    "  - Not all values of seq = L['ids'].size()[1] in the specified range seq <= 64 "
    "satisfy the generated guard ((-1) + L['ids'].size()[1]) != 1.\n\n"
    "The error above occurred when calling torch.export.export.")


class UserError(Exception):
    """Stands in for torch.export's ``UserError`` (only its name and text are read)."""


def test_mobilebert_guard_is_solved_for_its_dimension() -> None:
    assert violated_condition(MOBILEBERT) == (
        "seq ≠ 2 (seq: ids.shape[1], declared seq <= 64)")


def test_the_one_line_message_carries_the_condition() -> None:
    assert converter_message(UserError(MOBILEBERT)) == (
        "UserError: Constraints violated (seq): needs seq ≠ 2 (seq: ids.shape[1], "
        "declared seq <= 64)")


@pytest.mark.parametrize(("guard", "said"), [
    ("2*L['x'].size()[0] + 1 <= 9", "dim0 ≤ 4"),
    ("8 > (-1)*L['x'].size()[0]", "dim0 > -8"),
    ("-L['x'].size()[0] >= -5", "dim0 ≤ 5"),
    ("Eq(Mod(L['x'].size()[0], 8), 0)", "Eq(Mod(dim0, 8), 0)"),
    ("L['x'].size()[0] != L['y'].size()[1]", "dim0 != y.shape[1]"),
])
def test_guards_that_are_linear_in_the_dimension_are_solved(guard: str, said: str) -> None:
    text = (f"Not all values of dim0 = L['x'].size()[0] in the specified range "
            f"2 <= dim0 <= 16 satisfy the generated guard {guard}.")
    assert violated_condition(text) == f"{said} (dim0: x.shape[0], declared 2 <= dim0 <= 16)"


def test_other_messages_state_no_condition() -> None:
    assert violated_condition("Unsupported fx node new_ones") == ""
    assert converter_message(ValueError("a\nb")) == "ValueError: a"

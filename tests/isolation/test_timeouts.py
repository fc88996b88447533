"""``--timeout [STAGE=]SECONDS``: one grammar for every command, one limit per stage."""

from __future__ import annotations

import pytest

from nebisect.errors import NebisectError
from nebisect.isolation.timeouts import Timeouts


def test_defaults_when_not_given() -> None:
    assert Timeouts.parse(None) == Timeouts(load=300.0, convert=900.0, predict=120.0)
    assert Timeouts.parse([], Timeouts(predict=60.0)).predict == 60.0


def test_plain_value_sets_every_stage_and_a_stage_entry_wins_wherever_it_is() -> None:
    assert Timeouts.parse(["30"]) == Timeouts(30.0, 30.0, 30.0)
    assert Timeouts.parse(["convert=600", "30"]) == Timeouts(30.0, 600.0, 30.0)
    assert Timeouts.parse(["load=5", "predict=7"]) == Timeouts(5.0, 900.0, 7.0)


@pytest.mark.parametrize(("text", "message"), [
    ("soon", "give SECONDS or STAGE=SECONDS"),
    ("compile=5", "unknown stage 'compile', one of load, convert, predict"),
    ("0", "seconds must be a positive number"),
    ("predict=-1", "seconds must be a positive number"),
    ("inf", "seconds must be a positive number"),
])
def test_bad_values_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(NebisectError, match=message):
        Timeouts.parse([text], option="--case-timeout")

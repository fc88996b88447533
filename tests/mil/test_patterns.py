"""The max-shift matcher lint and the fixes share, on one positive and many negative
programs (tests/support/shift_programs.py)."""

from __future__ import annotations

import pytest
from support.shift_programs import BODIES, build, lse_op

from nebisect.mil.patterns import is_max_shifted, keeps_dims, max_shift, reduced_axes


@pytest.mark.parametrize("name", sorted(BODIES))
def test_is_max_shifted(name: str) -> None:
    assert is_max_shifted(lse_op(build(name))) is BODIES[name][1]


def test_max_shift_returns_the_reduce_max() -> None:
    peak = max_shift(lse_op(build("shifted")).inputs["x"])
    assert peak is not None and peak.op_type == "reduce_max"
    assert (reduced_axes(peak), keeps_dims(peak)) == ([1], True)
    assert max_shift(lse_op(build("unshifted")).inputs["x"]) is None


def test_reduced_axes_are_normalized() -> None:
    op = lse_op(build("max-over-fewer-axes"))
    assert reduced_axes(op) == [0, 1]

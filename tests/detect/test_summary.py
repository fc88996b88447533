"""``run``'s cliff lines: a cliff is two adjacent values whose outputs differ; a bracket
the exploration did not narrow says where the family fails from, not that it is a cliff."""

from __future__ import annotations

from nebisect.detect.summary import cliff_line
from nebisect.search.cliff import Cliff
from nebisect.search.records import CliffFinding

COLLAPSE = ("mismatch:collapse", "reduce_log_sum_exp", "export")


def finding(cliff: Cliff, family: str = "const", stopped: str | None = None) -> CliffFinding:
    found = CliffFinding(family, *COLLAPSE, cliff=cliff, spent=3)
    found.stopped = stopped
    return found


def test_a_localized_cliff_names_its_pair_and_the_element_both_sides_are_read_at() -> None:
    cliff = Cliff(7.62109375, 7.625, False, 11.0859375, 0.0, 17,
                  element={"output": "linear_0", "index": [0, 5]},
                  predicted={"label": "log(65504/32)", "value": 7.6241})
    line = cliff_line(finding(cliff))
    assert line.startswith("cliff in const: x 7.62109375 | 7.625 (output 11.0859 | 0 at "
                           "linear_0[0, 5]), 17 probes, 3 of them fresh predictions")
    assert line.endswith("; theory log(65504/32) = 7.6241")


def test_outputs_that_round_alike_are_printed_in_full() -> None:
    cliff = Cliff(1.0, 1.0009765625, False, 3.4785201, 3.4785203, 9)
    assert "(output 3.4785201 | 3.4785203)" in cliff_line(finding(cliff))


def test_a_bracket_not_localized_prints_as_failing_from_x() -> None:
    # Before: "cliff in signed: x 1.0 | 10.0 (3328 fp16 steps apart) (output …)", a
    # bracket 3328 values wide printed as a cliff.
    cliff = Cliff(1.0, 10.0, False, 4.14, 10.2, 4, ulps=3328)
    line = cliff_line(finding(cliff, "signed", "budget of 40 predictions spent"))
    assert not line.startswith("cliff")
    assert line.startswith("failing from x 10.0 in signed (passes at 1.0; not localized: "
                           "3328 fp16 steps apart, budget of 40 predictions spent)")
    falling = Cliff(-10.0, -1.0, True, 0.0, 2.0, 4, ulps=3328)
    assert cliff_line(finding(falling, "signed")).startswith(
        "failing from x -10.0 in signed (passes at -1.0; not localized: 3328 fp16 steps apart)")

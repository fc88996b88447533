"""A package's lint errors beside its findings: explained, or candidate causes."""

from __future__ import annotations

from nebisect.detect.candidates import candidate_lines
from nebisect.detect.causes import RunFinding
from nebisect.hazards.records import LintFinding
from nebisect.search.records import Culprit, FailureGroup, GroupKey
from nebisect.search.space import Member

MASK = LintFinding("fp16-inf-mask", "error", "constant 'c' (-inf) is -inf/inf in fp16 and "
                   "'extended' multiplies by it", "main", "c_to_fp16", "const")
SQUARE = LintFinding("fp16-overflow", "error", "square may exceed 65504", "main", "sq", "square")
WARNING = LintFinding("fp16-overflow", "warning", "exp may exceed 65504", "main", "e", "exp")


def _finding(number: int, op: str) -> RunFinding:
    key = GroupKey("sim:fp16", "mismatch:nonfinite", f"precision:{op}", "")
    group = FailureGroup.starting(key, "precision", Culprit(op, "mul", key.signature, ""),
                                  Member("masks", "mask(ones)", None, 1.0), "", 0)
    return RunFinding(number, "mul", "nonfinite", [group])


def test_a_hazard_at_the_culprit_or_naming_it_explains_the_finding() -> None:
    lines = candidate_lines([_finding(1, "extended")], [MASK, SQUARE, WARNING])
    assert lines == [
        "lint explains finding 1: fp16-inf-mask at const 'c_to_fp16': constant 'c' (-inf) is "
        "-inf/inf in fp16 and 'extended' multiplies by it",
        "lint candidate (no finding reproduced it): fp16-overflow at square 'sq': square may "
        "exceed 65504"]

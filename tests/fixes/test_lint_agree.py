"""Lint's ``lse-no-max-shift`` and the ``logsumexp-max-shift`` fix decide "already
shifted" the same way: lint flags a ``reduce_log_sum_exp`` exactly when the fix rewrites
it. They once had a matcher each and disagreed when a cast sat between the max-subtract
and the reduction (lint: safe; the fix: shifted again).
"""

from __future__ import annotations

import pytest
from support.shift_programs import BODIES, build

from nebisect.fixes import get_fix
from nebisect.hazards import lint_program


@pytest.mark.parametrize("name", sorted(BODIES))
def test_lint_flags_exactly_what_the_fix_rewrites(name: str) -> None:
    flagged = any(f.rule_id == "lse-no-max-shift"
                  for f in lint_program(build(name), assume_fp16=True).findings)
    rewritten = get_fix("logsumexp-max-shift").apply(build(name)) == 1
    assert flagged == rewritten == (not BODIES[name][1])

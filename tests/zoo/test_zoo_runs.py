"""Every zoo model through ``nebisect run`` with defaults: no internal error, ever, and a
report that says what the exit code says (issue: ordinary models first).

The zoo is split over two test files (this one and ``test_zoo_runs_b.py``) so that the
suite's two workers share it (``--dist loadfile`` keeps a file on one worker).
"""

from __future__ import annotations

import pytest
from support.zoo_runs import MODELS, check_default_run


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS[: len(MODELS) // 2])
def test_zoo_model_runs_by_default(name: str) -> None:
    check_default_run(name)

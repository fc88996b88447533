"""The second half of the zoo through ``nebisect run`` with defaults (see
``test_zoo_runs.py``)."""

from __future__ import annotations

import pytest
from support.zoo_runs import MODELS, check_default_run


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS[len(MODELS) // 2:])
def test_zoo_model_runs_by_default(name: str) -> None:
    check_default_run(name)

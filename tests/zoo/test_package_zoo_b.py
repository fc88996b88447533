"""The package zoo's second half (see ``test_package_zoo.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.package_zoo import NAMES, check_default_run


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("package_zoo_b")


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES[len(NAMES) // 2:])
def test_default_run(packages: Path, name: str) -> None:
    check_default_run(packages, name)

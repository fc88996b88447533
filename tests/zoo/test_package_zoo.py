"""The package zoo as a gate: every recipe of ``zoo/packages/recipes.py`` run with
defaults, as a user runs a package they already have — no internal error, a report that
agrees with its exit code, and the judgment docs/zoo.md gives it.

The recipes are split over two test files (this one and ``test_package_zoo_b.py``) so
that the suite's two workers share them (``--dist loadfile`` keeps a file on one
worker)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.package_zoo import NAMES, check_default_run


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("package_zoo")


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES[: len(NAMES) // 2])
def test_default_run(packages: Path, name: str) -> None:
    check_default_run(packages, name)

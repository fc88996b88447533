"""Suite-wide platform rules: the same suite runs on Linux and on macOS (macos.yml).

* Modules that inspect processes through ``/proc`` (leftover hunting by environment
  token, zombie states, huge pages) or that test Linux-only isolation guarantees (the
  child subreaper) are skipped elsewhere, with that reason. Isolation on macOS is
  covered by the spawn-mode tests that do run there and by targets/test_coreml_target.py.
* Fork mode is refused on macOS (coremltools #963, #1819): a test parametrized with
  ``mode="fork"`` is skipped there, so mode-dependent expectations hold per platform.
* ``macos_device``-marked tests need a Neural Engine and a GPU (a self-hosted
  Apple-silicon runner): skipped unless ``NEBISECT_DEVICE_TESTS=1`` says one is here —
  GitHub's hosted macOS runners are virtual machines without either.

It also holds the fixtures many modules share: a module's ``isolator`` and the one-op
log-sum-exp package ``lse``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from support import TESTS

if TYPE_CHECKING:
    from nebisect.isolate import Isolator

_LEFTOVERS = "finds leftover processes through /proc (support/leftovers.py)"
#: Test modules (relative to tests/) that need Linux, and why.
LINUX_ONLY = {
    "test_isolate.py": "inspects children through /proc and tests the Linux subreaper",
    "isolation/test_hugepages.py": "huge pages and /proc/self/smaps_rollup are Linux-only",
    "end_to_end/test_hostile_signals.py": _LEFTOVERS,
    "end_to_end/test_hostile_inputs.py": _LEFTOVERS,
    "end_to_end/test_hostile_blame.py": _LEFTOVERS,
    "end_to_end/test_hostile_memory.py": "RLIMIT_DATA bounds memory on Linux only; " + _LEFTOVERS,
    "end_to_end/test_hostile_corpus.py": _LEFTOVERS,
    "end_to_end/test_hostile_user_code.py": _LEFTOVERS,
    "end_to_end/test_hostile_cluster.py": _LEFTOVERS,
    "end_to_end/test_hostile_api.py": "RLIMIT_DATA bounds memory on Linux only; " + _LEFTOVERS,
}
DEVICE_TESTS_VAR = "NEBISECT_DEVICE_TESTS"


def pytest_configure(config: pytest.Config) -> None:
    missing = sorted(name for name in LINUX_ONLY if not (TESTS / name).is_file())
    if missing:  # a moved test file would otherwise silently lose its platform skip
        raise pytest.UsageError(f"LINUX_ONLY names missing test files: {', '.join(missing)}")
    config.addinivalue_line(
        "markers", "macos_device: needs a Neural Engine and a GPU (self-hosted Apple-silicon "
        f"runner; set {DEVICE_TESTS_VAR}=1)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        reason = LINUX_ONLY.get(item.path.relative_to(TESTS).as_posix())
        if reason and not sys.platform.startswith("linux"):
            item.add_marker(pytest.mark.skip(reason=f"Linux only: {reason}"))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if sys.platform == "darwin" and params.get("mode") == "fork":
            item.add_marker(pytest.mark.skip(
                reason="fork mode is refused on macOS (coremltools #963, #1819)"))
        if item.get_closest_marker("macos_device") and os.environ.get(DEVICE_TESTS_VAR) != "1":
            item.add_marker(pytest.mark.skip(
                reason=f"needs a Neural Engine and a GPU: runs on the self-hosted Apple-silicon "
                f"runner ({DEVICE_TESTS_VAR}=1); hosted macOS runners are VMs without either"))



@pytest.fixture(scope="module")
def isolator() -> Iterator[Isolator]:
    """An isolator in the platform's default mode (fork on Linux, spawn on macOS), shared
    by one module's tests and closed after them, templates and all."""
    from nebisect.isolate import Isolator

    with Isolator() as shared:
        yield shared


@pytest.fixture(scope="session")
def lse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one-op package of seed 000's bug: x (1, 32) fp16 → reduce_log_sum_exp over the
    channels, which collapses on ``sim:ane`` past x = log(65504/32) ≈ 7.62."""
    from support.corpus_helpers import lse_package

    return lse_package(tmp_path_factory.mktemp("lse") / "lse.mlpackage")

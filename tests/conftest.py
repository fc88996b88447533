"""Suite-wide platform rules: the same suite runs on Linux and on macOS (macos.yml).

* Modules that inspect processes through ``/proc`` (leftover hunting by environment
  token, zombie states, huge pages) or that test Linux-only isolation guarantees (the
  child subreaper) are skipped elsewhere, with that reason. Isolation on macOS is
  covered by the spawn-mode tests that do run there and by test_coreml_target.py.
* Fork mode is refused on macOS (coremltools #963, #1819): a test parametrized with
  ``mode="fork"`` is skipped there, so mode-dependent expectations hold per platform.
* ``macos_device``-marked tests need a Neural Engine and a GPU (a self-hosted
  Apple-silicon runner): skipped unless ``NEBISECT_DEVICE_TESTS=1`` says one is here —
  GitHub's hosted macOS runners are virtual machines without either.
"""

from __future__ import annotations

import os
import sys

import pytest

#: Test modules that need Linux, and why.
LINUX_ONLY = {
    "test_isolate.py": "inspects children through /proc and tests the Linux subreaper",
    "test_hugepages.py": "huge pages and /proc/self/smaps_rollup are Linux-only",
    "test_hostile_signals.py": "finds leftover processes through /proc (tests/leftovers.py)",
    "test_hostile_inputs.py": "finds leftover processes through /proc (tests/leftovers.py)",
    "test_hostile_corpus.py": "finds leftover processes through /proc (tests/leftovers.py)",
    "test_hostile_user_code.py": "finds leftover processes through /proc (tests/leftovers.py)",
    "test_hostile_cluster.py": "finds leftover processes through /proc (tests/leftovers.py)",
}
DEVICE_TESTS_VAR = "NEBISECT_DEVICE_TESTS"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "macos_device: needs a Neural Engine and a GPU (self-hosted Apple-silicon "
        f"runner; set {DEVICE_TESTS_VAR}=1)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        reason = LINUX_ONLY.get(item.path.name)
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

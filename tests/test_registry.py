"""Self-registering registries under concurrent first use (``--jobs`` worker threads)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from nebisect.registry import ImportOnce, package_modules

# Run in a fresh interpreter: the race exists only while a registry's modules are being
# imported for the first time, which has already happened in this process.
_FIRST_LOOKUPS_FROM_EIGHT_THREADS = textwrap.dedent("""
    import threading
    from nebisect.fixes import registered_fixes
    from nebisect.opspecs.ops import registered_ops as op_specs
    from nebisect.mil.kernels import kernel_ops as kernels
    from nebisect.targets.registry import get_target

    LOOKUPS = {
        "target": lambda: type(get_target("sim:fp32")).__name__,
        "specs": lambda: len(op_specs()),
        "kernels": lambda: len(kernels()),
        "fixes": lambda: len(registered_fixes()),
    }
    barrier = threading.Barrier(8)
    found = []

    def look_up(what):
        barrier.wait()
        try:
            found.append(f"{what}={LOOKUPS[what]()}")
        except Exception as exc:
            found.append(f"{what}=error: {exc}")

    threads = [threading.Thread(target=look_up, args=(what,))
               for what in list(LOOKUPS) * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print("\\n".join(sorted(found)))
""")


def test_concurrent_first_lookups_all_see_the_full_registries() -> None:
    done = subprocess.run([sys.executable, "-c", _FIRST_LOOKUPS_FROM_EIGHT_THREADS],
                          capture_output=True, text=True, timeout=120, check=True)
    found = done.stdout.split("\n")[:-1]
    assert len(found) == 8
    for first, second in zip(found[::2], found[1::2], strict=True):
        assert first == second and "error" not in first
    counts = dict(line.split("=") for line in found[::2])
    assert counts["target"] == "SimFP32"
    assert int(counts["specs"]) >= 40
    assert int(counts["kernels"]) >= 100
    assert int(counts["fixes"]) >= 6


def test_import_once_imports_each_module_once_and_skips_private_ones() -> None:
    calls: list[str] = []
    names = package_modules("nebisect.mil.kernels", skip=("conv",))

    def listed() -> list[str]:
        calls.append("listed")
        return names()

    load = ImportOnce(listed)
    load()
    load()
    assert calls == ["listed"]
    assert "nebisect.mil.kernels.activation" in names()
    assert "nebisect.mil.kernels.conv" not in names()
    assert not any(name.rsplit(".", 1)[1].startswith("_") for name in names())


def test_a_failed_import_is_retried_by_the_next_lookup() -> None:
    load = ImportOnce(lambda: ["nebisect.no_such_module"])
    for _ in range(2):
        with pytest.raises(ModuleNotFoundError):
            load()

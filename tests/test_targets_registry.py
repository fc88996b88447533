"""The target registry under concurrent first use (``--jobs`` worker threads)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# Run in a fresh interpreter: the race exists only while the built-in target modules
# are being imported for the first time, which has already happened in this process.
_FIRST_LOOKUPS_FROM_EIGHT_THREADS = textwrap.dedent("""
    import threading
    from nebisect.targets import get_target

    barrier = threading.Barrier(8)
    found = []

    def look_up():
        barrier.wait()
        try:
            found.append(type(get_target("sim:fp32")).__name__)
        except Exception as exc:
            found.append(f"error: {exc}")

    threads = [threading.Thread(target=look_up) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print("\\n".join(found))
""")


def test_concurrent_first_lookups_all_find_the_builtin_target() -> None:
    done = subprocess.run([sys.executable, "-c", _FIRST_LOOKUPS_FROM_EIGHT_THREADS],
                          capture_output=True, text=True, timeout=120, check=True)
    found = done.stdout.split()
    errors = [line for line in done.stdout.splitlines() if line.startswith("error")]
    assert errors == []
    assert len(found) == 8 and len(set(found)) == 1

"""Where a verdict was recorded: tool versions, interpreter, OS, machine, isolation mode.

A verdict without provenance cannot be compared with last month's: the same case can
pass with coremltools 8 and crash with 9. Versions are read from installed package
metadata (``importlib.metadata``), never by importing the packages — importing
coremltools costs seconds and imports torch.
"""

from __future__ import annotations

import functools
import platform
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from nebisect.version import __version__

_PACKAGES = ("coremltools", "torch", "numpy")


def package_version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"


def _chip() -> str:
    """The CPU's marketing name (Apple M2 Pro, an Intel or AMD model), '' if unknown."""
    if sys.platform == "darwin":
        try:
            result = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True, text=True, timeout=5, check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return ""
        return result.stdout.strip()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _os_name() -> str:
    if sys.platform == "darwin":
        return f"macOS {platform.mac_ver()[0]}"
    return f"{platform.system()} {platform.release()}"


@functools.cache
def _static() -> dict[str, str]:
    stamp = {"nebisect": __version__}
    stamp.update({name: package_version(name) for name in _PACKAGES})
    stamp.update(
        python=platform.python_version(),
        os=_os_name(),
        machine=platform.machine(),
        chip=_chip(),
    )
    return stamp


def provenance(isolation: str) -> dict[str, str]:
    """The provenance stamp for a verdict recorded now, in isolation mode ``isolation``."""
    return {**_static(), "isolation": isolation}

"""What the running macOS can load and run: its version and build, and what follows.

Three decisions hang on the operating system, and each was a silent failure before:

* **Which deployment target to convert for.** A program converted for iOS18 (Core ML
  specification 9) does not load on macOS 14, so every ``coreml:*`` row failed and the
  failure was blamed on the device. :func:`deployment_for` picks the newest target this
  macOS loads (capped at the converter default, which nebisect's simulator reads).
* **Whether a model needs a newer OS.** Core ML states the newest specification it loads
  (``_MLModelProxy.maximum_supported_specification_version()``, the check coremltools'
  own ``MLModel`` makes); a newer model is ``skipped`` with that reason, not a failure.
* **The compile-cache key.** A compiled ``.mlmodelc`` belongs to the Core ML that
  compiled it: after an OS update the same package may compile (and place ops)
  differently — seed 003's stale cache faked a pass — so the key carries the macOS build
  and the coremltools version beside the package's content hash.

Everything here takes its inputs as arguments (a version tuple, a plist path, a number)
so that the decisions are tested on any platform; only the ``running_*`` helpers read
this machine.
"""

from __future__ import annotations

import hashlib
import platform
import plistlib
import re
from pathlib import Path

from nebisect.errors import NebisectError

#: The converter default: what nebisect converts for off macOS and on macOS 15 or newer.
DEFAULT_DEPLOYMENT = "iOS18"
SYSTEM_VERSION_PLIST = Path("/System/Library/CoreServices/SystemVersion.plist")

#: Core ML specification version → the first OS releases that load it (coremltools'
#: ``_SPECIFICATION_VERSION_IOS_*`` constants).
SPEC_RELEASES = {
    5: "iOS14/macOS11", 6: "iOS15/macOS12", 7: "iOS16/macOS13", 8: "iOS17/macOS14",
    9: "iOS18/macOS15", 10: "iOS26/macOS26",
}


def macos_release(plist: Path = SYSTEM_VERSION_PLIST) -> tuple[str, str] | None:
    """(ProductVersion, ProductBuildVersion) from SystemVersion.plist; None off macOS."""
    try:
        with plist.open("rb") as handle:
            info = plistlib.load(handle)
    except (OSError, plistlib.InvalidFileException, ValueError):
        return None
    version, build = info.get("ProductVersion"), info.get("ProductBuildVersion")
    if not isinstance(version, str) or not isinstance(build, str):
        return None
    return version, build


def version_tuple(version: str) -> tuple[int, ...]:
    """``"14.4.1"`` → ``(14, 4, 1)``; non-numeric parts end the tuple."""
    parts: list[int] = []
    for part in version.split("."):
        if not part.isdigit():
            break
        parts.append(int(part))
    return tuple(parts)


def deployment_for(version: tuple[int, ...] | None) -> str:
    """The deployment target to convert for on macOS ``version`` (None: not macOS).

    macOS 13 and 14 get their own targets (specifications 7 and 8): a program converted
    for a newer target would not load there. macOS 15 and newer get the converter
    default, iOS18 — the same specification as macOS15, and the newest the simulator
    that judges the same package reads.
    """
    if version is None or version >= (15,):
        return DEFAULT_DEPLOYMENT
    if version >= (14,):
        return "macOS14"
    if version >= (13,):
        return "macOS13"
    return "macOS12"


_DEPLOYMENT = re.compile(r"(iOS|macOS|tvOS|watchOS|visionOS)\d+(_\d+)?")


def check_deployment(name: str) -> None:
    """Refuse a ``--deployment-target`` that is not a coremltools target name ('' is the
    default) before anything is converted."""
    if name and not _DEPLOYMENT.fullmatch(name):
        raise NebisectError(f"--deployment-target {name!r}: expected a coremltools target "
                            "such as macOS14, macOS15 or iOS18")


def running_deployment() -> str:
    """:func:`deployment_for` this machine."""
    release = macos_release() if platform.system() == "Darwin" else None
    return deployment_for(version_tuple(release[0]) if release else None)


def newer_os_needed(model_spec: int, loadable_spec: int) -> str:
    """Why a model of specification ``model_spec`` cannot load here ('' if it can)."""
    if model_spec <= loadable_spec:
        return ""
    wanted = SPEC_RELEASES.get(model_spec, f"specification {model_spec}")
    here = SPEC_RELEASES.get(loadable_spec, f"specification {loadable_spec}")
    return (f"model needs a newer OS: it is Core ML specification {model_spec} ({wanted}), "
            f"this Core ML loads up to {loadable_spec} ({here}); convert with "
            f"--deployment-target for this OS")


def compile_cache_key(content_hash: str, os_build: str, coremltools_version: str) -> str:
    """The compiled-model cache key: the package's content, the OS build, coremltools."""
    key = f"{content_hash}\0{os_build}\0{coremltools_version}".encode()
    return hashlib.sha256(key).hexdigest()


def running_os_build() -> str:
    """The macOS build (``23E224``), or the platform string off macOS."""
    release = macos_release() if platform.system() == "Darwin" else None
    return release[1] if release else platform.platform()

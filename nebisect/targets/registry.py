"""Target registry: spec name → Target class.

Built-in targets live in ``sim.py``, ``coreml.py`` and ``torch.py`` and register
themselves on import; those modules import nothing heavy at import time. Tests and
plugins register extra targets (e.g. a target that segfaults) with the same decorator.
A plugin is user code, imported only in isolated children (:func:`load_plugins` runs
there): a case's child imports the modules named in its ``plugins`` option, and the
parent knows their targets through stand-ins built from a description made in a child
(:mod:`nebisect.targets.plugins`).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path

from nebisect.arrays import sha256_path
from nebisect.errors import NebisectError
from nebisect.registry import ImportOnce, Registry
from nebisect.targets.base import Target
from nebisect.targets.spec import TargetSpec

#: Target classes by spec name; loading imports the built-in target modules.
TARGETS: Registry[str, type[Target]] = Registry("target", ImportOnce(
    lambda: ("nebisect.targets.sim", "nebisect.targets.coreml", "nebisect.targets.coreml_remote",
             "nebisect.targets.torch")
))
#: The device a remote target is registered under (``coreml-remote:<device>:ne``): every
#: connected device is reached through that one registration.
ANY_DEVICE = "<device>"


def register_target(*names: str) -> Callable[[type[Target]], type[Target]]:
    """Class decorator registering a target under one or more spec names."""

    def decorate(cls: type[Target]) -> type[Target]:
        return TARGETS.register_all(names, cls)

    return decorate


def load_plugins(plugins: Iterable[str]) -> None:
    """Import plugins that register extra targets: module names or paths to .py files.

    Child side only: nebisect's own process describes plugins with
    :func:`nebisect.targets.plugins.use_plugins` instead.

    A path works the same in the parent and in an isolated child whatever either's
    ``sys.path``; a file is imported once under a name derived from its content, so the
    same plugin in two copies of a corpus case registers its targets once.
    """
    for plugin in plugins:
        if not plugin.endswith(".py"):
            importlib.import_module(plugin)
            continue
        path = Path(plugin).resolve()
        if not path.is_file():
            raise NebisectError(f"plugin {plugin}: no such Python file")
        name = f"nebisect_plugin_{path.stem}_{sha256_path(path)[:16]}"
        if name in sys.modules:
            continue
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise NebisectError(f"plugin {plugin}: cannot be loaded as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)


def registered_targets() -> dict[str, type[Target]]:
    """Every target class by spec name, in name order."""
    return dict(TARGETS.items())


def spec_of(name: str) -> TargetSpec:
    """Parse a registered target name; extra (plugin) names inherit a parent's grammar.

    A plugin target ``sim:fp16-nan-suppressing`` parses as backend ``sim`` with the
    precision of its class's ``base_spec``.
    """
    base = getattr(TARGETS.get(name), "base_spec", None) if name in TARGETS else None
    if base:
        parsed = TargetSpec.parse(base)
        return TargetSpec(parsed.backend, name.split(":", 1)[1], parsed.dtype)
    return TargetSpec.parse(name)


def get_target(name: str) -> Target:
    """Instantiate the target registered under ``name``.

    A sim spec naming its op semantics (``sim:fp16:spec``) is the target registered
    without it, constructed with the full spec (the target reads ``spec.semantics``); a
    remote spec naming a device is the one registered for :data:`ANY_DEVICE`.
    """
    spec = spec_of(name)
    generic = replace(spec, semantics="", device=ANY_DEVICE if spec.device else "")
    registered = name if name in TARGETS else str(generic)
    return TARGETS.get(registered)(spec)

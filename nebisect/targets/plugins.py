"""Plugins (``--plugin``): described in an isolated child, stood in for by records here.

A plugin is a module name or a ``.py`` file that registers extra targets when imported.
Importing it in nebisect's own process would let it crash, hang or ``sys.exit(0)`` the
command; so :func:`use_plugins` imports each plugin in a child at stage ``load`` and
gets back one :class:`PluginTarget` per target it registered — the attributes the
parent consults (``base_spec`` for the spec grammar, ``needs`` for its children's process,
``availability`` for "cannot run here", the description for ``targets``). The parent
registers a :class:`DescribedTarget` stand-in under each name; the cases themselves
import the real plugin in their own child (``nebisect.evaluate.judge.evaluate_job``).

Paths are made absolute here, once, so every child imports the same file whatever its
working directory.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from nebisect.arrays import sha256_path
from nebisect.codec import Record
from nebisect.errors import NebisectError
from nebisect.isolate import Isolator, Needs
from nebisect.sources.loading import ChildSubject, describe_in_child, first_line, record_verdict
from nebisect.targets.base import Prediction, Target
from nebisect.targets.registry import register_target, registered_targets, spec_of
from nebisect.targets.spec import TargetSpec

PLUGIN_SUBJECT = ChildSubject("the plugin", "registering its targets")


@dataclass
class PluginTarget(Record):
    """One target a plugin registers, as the parent needs to know it."""

    name: str
    plugin: str
    base_spec: str = ""
    needs: Needs = Target.needs
    availability: str = ""
    description: str = ""


class DescribedTarget(Target):
    """Parent-side stand-in for a plugin target: its grammar and needs, no code."""

    record: ClassVar[PluginTarget]

    def availability(self) -> str | None:
        return self.record.availability or None

    def predict(
        self, model: Any, inputs: dict[str, np.ndarray], *, intermediates: bool = False
    ) -> Prediction:
        raise NebisectError(f"target {self.name} (plugin {self.record.plugin}) runs only in "
                            "an isolated child")


def absolute_plugin(text: str) -> str:
    """A ``.py`` plugin as an absolute path (it must exist); a module name unchanged."""
    if not text.endswith(".py"):
        return text
    if not Path(text).is_file():
        raise NebisectError(f"plugin {text}: no such file")
    return os.path.abspath(text)


@dataclass(frozen=True)
class PluginArguments:
    """The arguments of :func:`describe_plugin_job`: the plugin (a module name or an
    absolute ``.py`` path)."""

    plugin: str


def describe_plugin_job(arguments: PluginArguments) -> Any:
    """Child side: import the plugin; describe every target it registered."""

    def build() -> dict[str, Any]:
        from nebisect.targets.registry import load_plugins

        plugin = arguments.plugin
        before = set(registered_targets())
        try:
            load_plugins([plugin])
        except NebisectError:
            raise
        except Exception as exc:
            raise NebisectError(f"importing it raised {type(exc).__name__}: "
                                f"{first_line(str(exc))}") from None
        added = {n: c for n, c in registered_targets().items() if n not in before}
        records = []
        for name, cls in sorted(added.items()):
            target = cls(spec_of(name))
            records.append(PluginTarget(
                name, plugin, str(getattr(cls, "base_spec", "") or ""),
                cls.needs, target.availability() or "",
                (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else "",
            ).to_dict())
        return {"targets": records}

    return record_verdict(build)


_described: dict[tuple[str, str], list[PluginTarget]] = {}
_lock = threading.Lock()


def use_plugins(plugins: Iterable[str], *, timeout: float,
                isolator: Isolator | None = None) -> list[str]:
    """Describe each plugin in a child (once per process and file content) and register
    stand-ins for its targets here; returns the plugins as the children must name them
    (absolute paths)."""
    resolved = []
    with _lock:
        for text in plugins:
            plugin = absolute_plugin(text)
            resolved.append(plugin)
            key = (plugin, sha256_path(plugin) if plugin.endswith(".py") else "")
            if key not in _described:
                record = describe_in_child(
                    "nebisect.targets.plugins:describe_plugin_job",
                    PluginArguments(plugin), label=f"plugin {text}",
                    subject=PLUGIN_SUBJECT, timeout=timeout, isolator=isolator,
                )
                _described[key] = [PluginTarget.from_dict(t) for t in record["targets"]]
            _register(_described[key])
    return resolved


def parse_targets(texts: Iterable[str], plugins: Iterable[str] = (), *,
                  timeout: float) -> tuple[TargetSpec, ...]:
    """Target names as given (an option, a file) parsed once, into the
    :class:`~nebisect.targets.spec.TargetSpec` everything below the options holds; the
    targets of ``plugins`` are known (each plugin described in a child first, once per
    process: :func:`use_plugins`, bounded by ``timeout``). An unknown name is a
    :class:`~nebisect.targets.spec.TargetSpecError`."""
    use_plugins(plugins, timeout=timeout)
    return tuple(spec_of(name) for name in texts)


def _register(records: list[PluginTarget]) -> None:
    known = registered_targets()
    for record in records:
        if record.name in known:
            continue
        stand_in = type(f"Described_{record.name}", (DescribedTarget,), {
            "record": record, "base_spec": record.base_spec, "needs": record.needs,
            "__doc__": record.description or f"target from plugin {record.plugin}",
        })
        register_target(record.name)(stand_in)

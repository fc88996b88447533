"""What a command was asked to do, parsed once at the edge and handed down.

The option table's values (:mod:`nebisect.options.table`), checked and typed, become one
:class:`Invocation`; the command's :class:`~nebisect.executors.runner.Runner` owns it and
opens its isolators and executor from it, so every child and every cluster worker runs
under the command's own limits — never under settings of the process that happens to
run them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nebisect.isolation.timeouts import Timeouts
from nebisect.targets.spec import TargetSpec


@dataclass(frozen=True)
class Invocation:
    """The parsed options every stage below a command shares: the targets (parsed, plugin
    targets included), the timeouts per stage, the memory each isolated job may use (bytes;
    None: the machine default), the plugin modules, the parallel jobs and the Dask
    scheduler (None: ``$NEBISECT_CLUSTER``, else this machine)."""

    targets: tuple[TargetSpec, ...] = ()
    timeouts: Timeouts = field(default_factory=Timeouts)
    memory: int | None = None
    plugins: tuple[str, ...] = ()
    jobs: int = 1
    cluster: str | None = None

"""Executors: where independent units of work run — here, or on a Dask cluster (DESIGN §11).

``run``, ``replay``, ``fix verify`` and ``fuzz`` describe their work as :class:`Unit` records (a
registered kind, a JSON payload, files by sha256) and hand them to an executor:

* :class:`~nebisect.executors.local.LocalExecutor` (default) — the runner's isolators
  on this machine, one thread each (:func:`~nebisect.isolation.pool.map_isolated`);
* :class:`~nebisect.executors.cluster.ClusterExecutor` — ``--cluster tcp://HOST:PORT``
  or ``$NEBISECT_CLUSTER``: the workers of a Dask scheduler, each unit still in
  nebisect's isolated child on the worker (:mod:`nebisect.executors.worker`).

A command reaches either through its one :class:`~nebisect.executors.runner.Runner`
(:meth:`~nebisect.executors.runner.Runner.map_units`). Both return one
:class:`UnitResult` per unit, in unit order, holding the JSON the
kind's handler returned (or an error, e.g. two workers died under it) and its
attempts. Nothing but JSON and file bytes crosses the wire; Dask itself is imported
only when ``--cluster`` is used (a missing Dask is a one-line error then).

Adopting it in another command (as ``run``'s matrix cells did,
:mod:`nebisect.detect.remote`):

1. write a handler ``cell_unit(arguments: CellArguments, root, workdir, isolator) ->
   dict`` next to the code that evaluates a cell, taking everything from its arguments
   record and the files under ``root`` (never from the parent's memory), and register
   it in :data:`~nebisect.executors.units.UNIT_KINDS`;
2. build ``Unit("cell", encode(CellArguments(...)), paths=[files and folders relative to
   root], root=...)`` per cell (the cluster executor hashes and ships them; models go
   once per worker);
3. ``results = runner.map_units(units, cb)`` on the command's runner and parse
   ``result.value`` (or report ``result.error``) in the parent.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Protocol

from nebisect.executors.units import Attempt, Unit, UnitResult

if TYPE_CHECKING:
    from nebisect.isolation.isolator import Isolator

__all__ = ["CLUSTER_ENV", "CLUSTER_HELP", "Attempt", "Executor", "Unit", "UnitResult",
           "open_executor"]

CLUSTER_ENV = "NEBISECT_CLUSTER"
CLUSTER_HELP = ("Run on the Dask scheduler at tcp://HOST:PORT (default: $NEBISECT_CLUSTER; "
                "needs nebisect\\[cluster]); each unit still runs isolated on a worker.")


class Executor(Protocol):
    name: str

    def map(
        self,
        units: Sequence[Unit],
        on_result: Callable[[int, UnitResult], None] | None = None,
    ) -> list[UnitResult]: ...

    def close(self) -> None: ...


@contextlib.contextmanager
def open_executor(cluster: str | None, *, isolators: Sequence[Isolator], mode: str = "auto",
                  memory: int | None = None, local: bool = False) -> Iterator[Executor]:
    """The cluster executor for ``cluster`` (or ``$NEBISECT_CLUSTER``; its workers isolate
    in ``mode``, each job under ``memory`` bytes, None: the worker's default), else — or
    when ``local`` — the local one on ``isolators``."""
    address = "" if local else cluster or os.environ.get(CLUSTER_ENV, "")
    executor: Executor
    if address:
        from nebisect.executors.cluster import ClusterExecutor

        executor = ClusterExecutor(address, mode=mode, memory=memory)
    else:
        from nebisect.executors.local import LocalExecutor

        executor = LocalExecutor(isolators)
    try:
        yield executor
    finally:
        executor.close()

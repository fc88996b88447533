"""The local executor: units on a runner's isolators on this machine (the default).

A thin wrapper over :func:`~nebisect.isolation.pool.map_isolated`: each unit's handler
runs in a worker thread with that thread's isolator (one of the
:class:`~nebisect.executors.runner.Runner`'s, so their templates stay warm between
maps), reading the unit's files where they are (``unit.root``) and writing under a
private scratch directory removed at the end. Results go through the same JSON as on
a cluster, so a kind's result parsing is one code path whichever executor ran it.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from nebisect.executors.units import Attempt, Unit, UnitResult, run_unit_here, to_wire
from nebisect.isolation.isolator import Isolator
from nebisect.isolation.pool import map_isolated

LOCAL = "local"


class LocalExecutor:
    """Runs units on one thread per isolator of ``isolators`` here (they stay open)."""

    name = LOCAL

    def __init__(self, isolators: Sequence[Isolator]) -> None:
        self.isolators = list(isolators)

    def map(
        self,
        units: Sequence[Unit],
        on_result: Callable[[int, UnitResult], None] | None = None,
    ) -> list[UnitResult]:
        """Every unit's result, in unit order; ``on_result(index, result)`` as each ends."""
        indexed = list(enumerate(units))
        with tempfile.TemporaryDirectory(prefix="nebisect-units-") as scratch:

            def work(item: tuple[int, Unit], isolator: Isolator) -> UnitResult:
                index, unit = item
                assert unit.root is not None, "a local unit reads its files from its root"
                value = run_unit_here(unit, unit.root, Path(scratch, str(index)), isolator)
                # The cluster's wire format, so both executors hand back the same data.
                result = UnitResult(json.loads(to_wire(value)), [Attempt(LOCAL, "done")])
                if on_result is not None:
                    on_result(index, result)
                return result

            return map_isolated(indexed, work, len(self.isolators), isolators=self.isolators)

    def close(self) -> None:
        """Nothing to release: the isolators belong to the runner."""

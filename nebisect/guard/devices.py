"""A replay over a device matrix: every case on every selected worker of a cluster.

``replay --cluster ADDR --devices SELECTOR`` picks workers by their advertised facts
and groups them into devices (workers with the same facts,
:mod:`nebisect.executors.devices`), runs each case once per device (the unit asks for
the device's Dask resources, so the scheduler runs it on one of that device's workers
only: a result from another chip would be a wrong cell), and judges each cell against
the case's expectation for that device's chip family
(:meth:`~nebisect.corpus.record.Expected.for_chip`): a case may be ``failing`` on M1
and ``fixed`` on M4.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from nebisect.corpus.store import CorpusCase
from nebisect.executors.cluster import ClusterExecutor
from nebisect.executors.devices import Device, select
from nebisect.executors.units import UnitResult
from nebisect.guard.replay import (
    ReplayResult,
    judge,
    replay_unit_of,
    result_of,
    selected,
    unit_verdict,
)
from nebisect.isolation.timeouts import DEFAULT_TIMEOUTS, Timeouts


@dataclass
class DeviceMatrix:
    """Cells in case order, then device order; a cell's ``device`` holds its device's
    ``label``, facts and the ``address`` of the worker that ran it."""

    devices: list[Device]
    cells: list[ReplayResult] = field(default_factory=list)

    @property
    def regressions(self) -> list[ReplayResult]:
        return [c for c in self.cells if c.outcome == "regression"]


def replay_devices(
    cases: Sequence[CorpusCase],
    executor: ClusterExecutor,
    selector: str,
    *,
    targets: Sequence[str] = (),
    timeouts: Timeouts = DEFAULT_TIMEOUTS,
    on_result: Callable[[ReplayResult], None] | None = None,
) -> DeviceMatrix:
    """Each selected case on each worker ``selector`` picks."""
    matrix = DeviceMatrix(select(executor.workers(), selector))
    chosen = [c for c in cases if selected(c, targets)]
    cells = [(case, device) for case in chosen for device in matrix.devices]
    results: dict[int, ReplayResult] = {}

    def judged(index: int, unit_result: UnitResult) -> None:
        case, device = cells[index]
        verdict = unit_verdict(unit_result, case)
        expected = case.record.expected.for_chip(device.facts.get("family", ""))
        result = result_of(case, verdict, *judge(expected, verdict))
        result.expected = expected
        result.device = {"label": device.label, "address": unit_result.worker, **device.facts}
        results[index] = result
        if on_result is not None:
            on_result(result)

    executor.map([replay_unit_of(case, timeouts) for case, _ in cells], judged,
                 resources=[device.resources for _, device in cells])
    matrix.cells = [results[i] for i in range(len(cells))]
    return matrix

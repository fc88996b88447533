"""A Dask worker preload that advertises the worker's device facts as resources.

``dask worker tcp://SCHEDULER:8786 --preload nebisect.executors.preload`` gives the
worker one resource per fact (:func:`~nebisect.executors.devices.fact_resources`:
``family-m4``, ``chip-apple-m4``…), as many as it has threads, so a unit that asks
for one of each runs on as many threads as the worker has. They are set before the
worker registers, so the scheduler knows them from the start.

``python -m nebisect.executors.preload [THREADS]`` prints the same as a ``--resources``
value, for a worker started without the preload (or to check what a machine
advertises); give it the worker's ``--nthreads``.
"""

from __future__ import annotations

import sys
from typing import Any

from nebisect.executors.devices import fact_resources, local_facts


def dask_setup(worker: Any) -> None:
    """Dask's preload hook: add this machine's fact resources to ``worker``'s own."""
    quantity = float(worker.state.nthreads)
    for name in fact_resources(local_facts()):
        worker.state.total_resources[name] = quantity
        worker.state.available_resources[name] = quantity


def resources_argument(threads: int = 1) -> str:
    """This machine's fact resources as ``dask worker --resources`` takes them."""
    return " ".join(f"{name}={threads}" for name in fact_resources(local_facts()))


if __name__ == "__main__":
    print(resources_argument(int(sys.argv[1]) if len(sys.argv) > 1 else 1))

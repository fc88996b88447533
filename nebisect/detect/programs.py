"""What ``run`` needs to know of a converted program, read in an isolated child.

Naming the op where a failure enters (:mod:`nebisect.detect.culprit`) needs the
program's dependency structure, and the guided probes (:mod:`nebisect.detect.probes`)
need lint's interval analysis over it. Both read the program with coremltools. Done in
``run``'s own process, that import costs seconds of CPU (coremltools there also imports
torch, transformers and scipy) on the critical path, for a few milliseconds of work.
Here it runs as a job in the template that evaluates the program's cells, which has
coremltools imported already, and only a plain record crosses back: the
:class:`ProgramOutline` (a :class:`~nebisect.bisect.Dag` and the op types) and the
probes as :class:`~nebisect.detect.probes.Probe` records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nebisect.bisect import Dag
from nebisect.isolate import Isolator
from nebisect.sources.loading import ChildSubject, describe_in_child, record_verdict
from nebisect.verdict import Verdict

SUBJECT = ChildSubject("reading the converted program", "its description")


@dataclass(frozen=True)
class ProgramOutline:
    """The dependency view of a program's ``main`` function and the type of each op:
    what a culprit search reads of a :class:`~nebisect.minimize.graphs.mil.MilGraph`."""

    dag: Dag
    op_types: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        dag = self.dag
        return {"order": list(dag.order),
                "consumes": {u: list(v) for u, v in dag.consumes.items()},
                "produces": {u: list(v) for u, v in dag.produces.items()},
                "inputs": list(dag.inputs), "outputs": list(dag.outputs),
                "op_types": self.op_types}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProgramOutline:
        return cls(Dag(data["order"], data["consumes"], data["produces"], data["inputs"],
                       data["outputs"]), dict(data["op_types"]))


def outline_job(payload: dict[str, Any]) -> Verdict:
    """Child side of :func:`outline`."""
    from nebisect.mil.load import load_program
    from nebisect.minimize.graphs.mil import MilGraph

    def build() -> dict[str, Any]:
        graph = MilGraph(load_program(payload["package"]))
        return ProgramOutline(graph.dag, dict(graph.op_types)).to_dict()

    return record_verdict(build)


def guided_job(payload: dict[str, Any]) -> Verdict:
    """Child side of :func:`guided`."""
    from nebisect.detect.probes import guided_probes
    from nebisect.mil.load import load_program

    return record_verdict(lambda: {"probes": [
        probe.to_dict() for probe in guided_probes(load_program(payload["package"]))]})


def outline(package: str, *, isolator: Isolator, preload: tuple[str, ...],
            timeout: float) -> ProgramOutline:
    """The outline of the package at ``package``; ``preload`` should name the template
    that evaluates it, so that no other template starts for this."""
    return ProgramOutline.from_dict(_read("outline_job", package, isolator, preload, timeout))


def guided(package: str, *, isolator: Isolator, preload: tuple[str, ...],
           timeout: float) -> list[Any]:
    """Lint's guided probes of the package (:func:`~nebisect.detect.probes.guided_probes`,
    fp32 values read as fp16), smallest magnitude first."""
    from nebisect.detect.probes import Probe

    record = _read("guided_job", package, isolator, preload, timeout)
    return [Probe.from_dict(probe) for probe in record["probes"]]


def _read(job: str, package: str, isolator: Isolator, preload: tuple[str, ...],
          timeout: float) -> dict[str, Any]:
    return describe_in_child(f"{__name__}:{job}", {"package": package}, label=package,
                             subject=SUBJECT, timeout=timeout, preload=preload,
                             isolator=isolator)

"""What ``run`` needs to know of a converted program, read in an isolated child.

Naming the op where a failure enters (:mod:`nebisect.detect.culprit`) needs the
program's dependency structure, and the guided probes (:mod:`nebisect.inputs.guided`)
need lint's interval analysis over it. Both read the program with coremltools. Done in
``run``'s own process, that import costs seconds of CPU (coremltools there also imports
torch, transformers and scipy) on the critical path, for a few milliseconds of work.
Here it runs as a job in the template that evaluates the program's cells, which has
coremltools imported already, and only a plain record crosses back: the
:class:`ProgramOutline` (a :class:`~nebisect.search.divergence.Dag` and the op types) here, the
probes as records in :mod:`nebisect.inputs.guided`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nebisect.case import SourceRef
from nebisect.isolate import Isolator, Needs
from nebisect.search.divergence import Dag
from nebisect.sources.loading import (
    ChildSubject,
    PackageArguments,
    describe_in_child,
    record_verdict,
)
from nebisect.verdict import Verdict

SUBJECT = ChildSubject("reading the converted program", "its description")


@dataclass(frozen=True)
class ProgramOutline:
    """The dependency view of a program's ``main`` function, the type of each op, the
    runtime rules an op breaks (:func:`~nebisect.mil.semantics.rules.broken_rules`) and
    the inf/NaN constants an op reads (:func:`~nebisect.mil.graph.nonfinite_constants`):
    what a culprit search reads of a :class:`~nebisect.mil.graph.ProgramGraph`."""

    dag: Dag
    op_types: dict[str, str]
    rules: dict[str, tuple[str, ...]] = field(default_factory=dict)
    constants: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, written by hand rather than by the codec: a ``Dag`` is an
        algorithm's object, not a record, so its lists are laid out beside the op types."""
        dag = self.dag
        return {"order": list(dag.order),
                "consumes": {u: list(v) for u, v in dag.consumes.items()},
                "produces": {u: list(v) for u, v in dag.produces.items()},
                "inputs": list(dag.inputs), "outputs": list(dag.outputs),
                "op_types": self.op_types,
                "rules": {op: list(names) for op, names in self.rules.items()},
                "constants": {op: list(names) for op, names in self.constants.items()}}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProgramOutline:
        return cls(Dag(data["order"], data["consumes"], data["produces"], data["inputs"],
                       data["outputs"]), dict(data["op_types"]),
                   {op: tuple(names) for op, names in data.get("rules", {}).items()},
                   {op: tuple(names) for op, names in data.get("constants", {}).items()})


def outline_job(package: PackageArguments) -> Verdict:
    """Child side of :func:`outline`."""
    from nebisect.isolation import memory
    from nebisect.mil.graph import ProgramGraph, nonfinite_constants
    from nebisect.mil.load import load_program
    from nebisect.mil.semantics.rules import broken_rules

    def build() -> dict[str, Any]:
        graph = ProgramGraph(load_program(package.package, package.function,
                                          memory_budget=memory.budget()))
        return ProgramOutline(graph.dag, dict(graph.op_types), broken_rules(graph.function),
                              nonfinite_constants(graph)).to_dict()

    return record_verdict(build)


def outline(package: SourceRef, *, isolator: Isolator, needs: Needs,
            timeout: float) -> ProgramOutline:
    """The outline of the package ``package`` names (of its function); ``needs`` should
    be those of the children that evaluate it, so that no other template starts for
    this."""
    return ProgramOutline.from_dict(
        read_program(f"{__name__}:outline_job", package, isolator, needs, timeout))


def read_program(job: str, package: SourceRef, isolator: Isolator, needs: Needs,
                 timeout: float) -> dict[str, Any]:
    """The record ``job`` (``module:function`` of a child job taking
    :class:`~nebisect.sources.loading.PackageArguments`) returns for the package
    ``package`` names (of its function), read in a child with ``needs``."""
    return describe_in_child(job, PackageArguments(package.location, package.function),
                             label=package.location, subject=SUBJECT, timeout=timeout,
                             needs=needs, isolator=isolator)

"""An exported torch graph held by an isolated child; the parent sees records only.

Exporting a torch source traces the user's ``forward``, and recording its node values
runs the graph on real inputs: user code, which never runs in nebisect's own process
(DESIGN §3). So the :class:`~nebisect.minimize.graphs.fx.FxGraph` lives in a child, and both
sides of the contract are here:

* :func:`describe_graph_job` exports and records, and returns the graph as the
  reduction sees it — a :class:`GraphRecord`: units in order, each unit's group at
  every submodule depth, each node's op for the report;
* :func:`candidate_job` turns one unit subset into a
  :class:`~nebisect.minimize.graphs.fx.TorchCandidate` (code and dims in the record, weights and
  inputs as arrays), or says why that subset cannot be cut;
* :class:`IsolatedFxGraph` is the parent's stand-in: it asks the child for each.

The jobs run in a persistent worker, which keeps the graph between jobs
(:data:`_graphs`, keyed by source, file content and inputs): a candidate costs a round
trip, not an export. A worker that died is replaced and its next job exports again.
Every job is bounded by the load timeout, and a child that crashes, hangs, exits or
cannot export is one line naming the source (:func:`nebisect.sources.loading.explain`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nebisect.arrays import load_npz, sha256_path
from nebisect.case import TORCH, SourceRef
from nebisect.codec import Record, encode
from nebisect.errors import NebisectError
from nebisect.isolate import Isolator, Job, Needs
from nebisect.mil.graph import ExtractionError
from nebisect.minimize.graphs.fx import FxGraph, TorchCandidate
from nebisect.sources.loading import STAGE, ChildSubject, record_of, record_verdict, unprefixed

#: How each job is named in an error line: the export, or cutting one candidate from it
#: (a worker restarted after a crash exports again while cutting).
EXPORTING = ChildSubject("exporting the graph", "returning it", when="")
CUTTING = ChildSubject("cutting the graph", "returning the candidate", when="")
#: The graph child imports torch, never coremltools (the conversions have their own).
GRAPH_NEEDS = Needs(imports=("numpy", "torch"))


@dataclass
class GraphRecord(Record):
    """What the reduction needs of an exported graph: no module, no values."""

    units: list[str]
    groups: list[dict[str, str]]
    targets: dict[str, str]

    @property
    def levels(self) -> list[Callable[[str], str]]:
        """Group-of-unit functions, depth 1 … deepest (as :attr:`FxGraph.levels`)."""
        return [groups.__getitem__ for groups in self.groups]


# ---------------------------------------------------------------------------- child side
_graphs: dict[tuple[str, str, str], FxGraph] = {}


@dataclass(frozen=True)
class GraphArguments:
    """The arguments of :func:`describe_graph_job`: the torch source and the ``.npz`` of
    the values to record and feed candidates ("": the source's example inputs)."""

    source: str
    inputs: str


@dataclass(frozen=True)
class CandidateArguments:
    """The arguments of :func:`candidate_job`: the graph's and the units to keep."""

    graph: GraphArguments
    units: list[str]


def _graph(arguments: GraphArguments) -> FxGraph:
    """The graph of a source and its inputs, exported once per worker."""
    import torch

    from nebisect.sources.torch_load import load_torch_source
    from nebisect.sources.torch_module import to_torch_inputs

    location, inputs = arguments.source, arguments.inputs
    key = (location, sha256_path(SourceRef(TORCH, location).file),
           sha256_path(inputs) if inputs else "")
    if key not in _graphs:
        try:
            loaded = load_torch_source(location)
            tensors = (to_torch_inputs(loaded, load_npz(inputs), torch.float32)
                       if inputs else None)
            _graphs[key] = FxGraph(loaded, tensors)
        except NebisectError as exc:
            raise NebisectError(unprefixed(str(exc), location)) from None
    return _graphs[key]


def describe_graph_job(arguments: GraphArguments) -> Any:
    """Child side: export and record the graph; its :class:`GraphRecord`."""

    def build() -> dict[str, Any]:
        graph = _graph(arguments)
        return GraphRecord(
            units=list(graph.units),
            groups=[{u: level(u) for u in graph.units} for level in graph.levels],
            targets={u: str(graph.nodes[u].target) for u in graph.units},
        ).to_dict()

    return record_verdict(build)


def candidate_job(arguments: CandidateArguments) -> Any:
    """Child side: the candidate of the units as a record and arrays, or
    ``{"invalid": why}`` when the subset cannot be cut (a verdict of the search, not
    an error of the source)."""
    arrays: dict[str, np.ndarray] = {}

    def build() -> dict[str, Any]:
        graph = _graph(arguments.graph)
        try:
            record, made = graph.candidate(arguments.units).to_record()
        except ExtractionError as exc:
            return {"invalid": str(exc)}
        arrays.update(made)
        return record

    return record_verdict(build), arrays


# ---------------------------------------------------------------------------- parent side
class IsolatedFxGraph:
    """The parent's view of a torch source's exported graph; the graph stays in
    ``isolator``'s child (use a persistent isolator so it is exported once).

    ``inputs`` is an ``.npz`` of the values to record and feed candidates ("" for the
    source's example inputs); ``label`` names the source in error lines.
    """

    def __init__(self, location: str, inputs: Path | None, *, label: str,
                 isolator: Isolator, timeout: float) -> None:
        self._graph = GraphArguments(location, str(inputs) if inputs else "")
        self._label = label
        self._isolator = isolator
        self._timeout = timeout
        self.record = GraphRecord.from_dict(
            self._ask("describe_graph_job", self._graph, EXPORTING)[0])

    @property
    def units(self) -> list[str]:
        return self.record.units

    def candidate(self, units: Sequence[str]) -> TorchCandidate:
        """The candidate of ``units``, built in the child; ExtractionError if it cannot
        be cut."""
        record, arrays = self._ask("candidate_job",
                                   CandidateArguments(self._graph, list(units)), CUTTING)
        if "invalid" in record:
            raise ExtractionError(str(record["invalid"]))
        return TorchCandidate.from_record(record, arrays)

    def _ask(self, job: str, arguments: object, subject: ChildSubject
             ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        outcome = self._isolator.run(Job(
            function=f"{__name__}:{job}", payload=encode(arguments), stage=STAGE,
            timeout=self._timeout, needs=GRAPH_NEEDS,
        ))
        record = record_of(outcome.verdict, label=self._label, subject=subject,
                           timeout=self._timeout)
        return record, outcome.arrays

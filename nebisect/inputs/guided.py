"""Guided probes of one model, and the margins a declared input domain leaves.

The probes themselves are lint's (:mod:`nebisect.inputs.probes`); reading them needs the
converted program, so they are read in the template that evaluates it
(:mod:`nebisect.evaluate.programs`) and cross back as records. A probe beyond its
input's declared domain is not explored: it becomes a :class:`Margin`, how far the model
is from a failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nebisect.case import SourceRef
from nebisect.codec import Record
from nebisect.evaluate.programs import read_program
from nebisect.evaluate.workbench import Workbench
from nebisect.inputs.probes import Probe
from nebisect.isolate import Isolator, Needs
from nebisect.search.cliff import Boundary
from nebisect.sources.domains import InputDomain
from nebisect.sources.loading import PackageArguments
from nebisect.targets.spec import TargetSpec
from nebisect.verdict import Verdict


@dataclass(frozen=True)
class Margin(Record):
    """A hazard that lies only beyond an input's declared domain: not a failure, but how
    far the model is from one (lint's guided probe: ``op`` leaves fp16 once every
    element of ``input`` reaches ``magnitude``)."""

    input: str
    op_type: str
    op_name: str
    magnitude: float
    domain: str
    #: ``magnitude`` over the domain's largest |value|
    factor: float

    def describe(self) -> str:
        return (f"{self.op_type} '{self.op_name}' overflows fp16 for |{self.input}| ≥ "
                f"{self.magnitude:.3g}: {self.factor:,.0f}× beyond the declared range "
                f"{self.domain}")


def guided_job(package: PackageArguments) -> Verdict:
    """Child side of :func:`guided`."""
    from nebisect.inputs.probes import guided_probes
    from nebisect.isolation import memory
    from nebisect.mil.load import load_program
    from nebisect.sources.loading import record_verdict

    def probes() -> dict[str, Any]:
        program = load_program(package.package, package.function,
                               memory_budget=memory.budget())
        return {"probes": [probe.to_dict() for probe in guided_probes(program)]}

    return record_verdict(probes)


def guided(package: SourceRef, *, isolator: Isolator, needs: Needs,
           timeout: float) -> list[Probe]:
    """Lint's guided probes of the package (:func:`~nebisect.inputs.probes.guided_probes`,
    fp32 values read as fp16), smallest magnitude first."""
    record = read_program(f"{__name__}:guided_job", package, isolator, needs, timeout)
    return [Probe.from_dict(probe) for probe in record["probes"]]


def guided_probes_of(bench: Workbench, targets: list[TargetSpec]) -> list[Probe]:
    """Lint's guided probes on the fp16 program of ``targets`` (the fp32 one, read as
    fp16 as the Neural Engine computes, when no target converts to fp16), read in the
    template that evaluates it."""
    programs = [t for t in targets if t.runs_programs]
    chosen = [t for t in programs if t.precision == "fp16"] or programs
    paths = bench.paths_of(chosen[0]) if chosen else []
    if isinstance(paths, Verdict) or not paths:
        return []
    return guided(bench.program(chosen[0], paths[0]), isolator=bench.isolator,
                  needs=bench.needs(chosen[0]),
                  timeout=bench.timeouts.load)


def within_domains(probes: list[Probe], domains: dict[str, InputDomain]
                   ) -> tuple[list[Boundary], list[Margin]]:
    """The probes to explore, as boundaries of the input's value (one per magnitude),
    and those beyond their input's declared domain, as margins instead."""
    boundaries: dict[float, Boundary] = {}
    margins = []
    for probe in probes:
        domain = domains.get(probe.input)
        if domain is not None and probe.magnitude > domain.magnitude:
            margins.append(Margin(probe.input, probe.op_type, probe.op_name, probe.magnitude,
                                  domain.describe(),
                                  probe.magnitude / max(domain.magnitude, 1e-300)))
        else:
            boundaries.setdefault(round(probe.magnitude, 9), probe.boundary())
    return list(boundaries.values()), margins

"""Resolve what the user handed to ``run``/``bisect``: an .mlpackage, ``file.py:factory``
or a saved torch program (``.pt2``, TorchScript).

Everything that can be wrong with a source is found here, before any case runs, and
reported as one line: a missing path, a neuralnetwork ``.mlmodel`` (the simulator and
the reducer need an ML program), a corrupt package or one whose manifest or symlinks
lead outside it (:func:`~nebisect.package.check_package`), a package whose program does
not load (a missing or corrupt weight file, an unknown op, a cycle), a program declaring
a tensor the memory limit cannot hold (:mod:`nebisect.mil.sizes`), a factory that
raises, crashes, exits or hangs. A torch source is described in an isolated child
(:mod:`nebisect.sources.torch`): its code never runs in this process. A package's spec
is read and its program loaded in an isolated child too, so that this process never
imports coremltools just for that. Locations come back absolute, so no later child
depends on its working directory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nebisect.case import SourceRef, torch_form
from nebisect.errors import NebisectError
from nebisect.isolation.timeouts import Timeouts
from nebisect.mil.quiet import COREMLTOOLS_ONLY
from nebisect.package import MANIFEST, check_package
from nebisect.sources.domains import InputDomain
from nebisect.sources.inputs import InputDescription, describe_spec
from nebisect.sources.loading import (
    ChildSubject,
    describe_in_child,
    record_verdict,
    unprefixed,
)
from nebisect.verdict import Verdict

if TYPE_CHECKING:
    from nebisect.isolate import Isolator


PACKAGE_SUBJECT = ChildSubject("reading the package", "its description")
PROGRAM_SUBJECT = ChildSubject("reading the package", "its program")


@dataclass
class Source:
    """A resolved source: its kind, location and input descriptions.

    ``example`` is a torch factory's own example inputs (None for a package: it has none).
    """

    kind: str
    location: str
    inputs: list[InputDescription] = field(default_factory=list)
    example: dict[str, np.ndarray] | None = field(default=None, repr=False)
    #: the values each input takes (the factory's declaration, then ``--input-range``)
    domains: dict[str, InputDomain] = field(default_factory=dict)
    #: output → the mask input whose padded positions are not compared
    masked_outputs: dict[str, str] = field(default_factory=dict)
    #: ``masked_outputs`` was inferred from the outputs' shapes (the report says so)
    masks_inferred: bool = False
    #: the model's states (``ct.StateType``, iOS 18): kept between predictions, so the
    #: model is judged over several (``run --steps``)
    states: list[str] = field(default_factory=list)

    def with_domains(self, given: dict[str, InputDomain]) -> Source:
        """This source with ``given`` domains added (``--input-range``: they win over the
        factory's); an input the model does not take is an input error."""
        names = [d.name for d in self.inputs]
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise NebisectError(f"--input-range names {', '.join(unknown)}, not an input of "
                                f"{self.location} ({', '.join(names)})")
        return replace(self, domains={**self.domains, **given})

    @property
    def ref(self) -> SourceRef:
        """The model it names (a package or a torch file + factory)."""
        return SourceRef(self.kind, self.location)

    @property
    def reference(self) -> str:
        """The oracle: torch fp64 for torch sources, the fp64 simulator otherwise."""
        return self.ref.reference_target


def is_torch_location(text: str) -> bool:
    """Does ``text`` name a torch source: a factory (``path/file.py:factory``) or a saved
    program (``model.pt2``, ``model.pt``)?"""
    return bool(torch_form(text))


def resolve_source(text: str, *, timeout: float = Timeouts.load,
                   isolator: Isolator | None = None) -> Source:
    """Classify and validate a source string; ``timeout`` bounds describing a torch
    source (in a child of ``isolator``, or of a throw-away one)."""
    if is_torch_location(text):
        from nebisect.sources.torch import describe_torch

        described = describe_torch(text, timeout=timeout, isolator=isolator)
        return Source("torch", described.location, described.inputs, described.example,
                      described.domains, described.masked_outputs, described.masks_inferred)
    path = Path(text)
    if not path.exists():
        raise NebisectError(f"{text}: no such file or directory")
    if path.suffix == ".mlmodel":
        raise NebisectError(
            f"{text}: a neuralnetwork .mlmodel; nebisect needs an ML program (.mlpackage) — "
            "re-convert with convert_to='mlprogram'"
        )
    if path.suffix == ".py":
        raise NebisectError(f"{text}: name the factory as {text}:factory_function")
    if not (path.is_dir() and (path / MANIFEST).is_file()):
        raise NebisectError(f"{text}: not an .mlpackage (no {MANIFEST})")
    check_package(path, text)
    record = describe_in_child(f"{__name__}:package_job", {"package": str(path)}, label=text,
                               subject=PACKAGE_SUBJECT, timeout=timeout,
                               needs=COREMLTOOLS_ONLY, isolator=isolator)
    return Source("mlpackage", os.path.abspath(path),
                  [InputDescription.from_dict(d) for d in record["inputs"]],
                  states=list(record["states"]))


def package_job(payload: dict[str, Any]) -> Verdict:
    """Child side of resolving a package: is it an ML program that loads, and what are
    its inputs and its states?

    Reading the spec needs coremltools, whose import in ``run``'s own process would
    cost seconds; the child is forked from the template that simulates the package
    next, so it costs that template nothing it would not import anyway.
    """
    package = payload["package"]

    def build() -> dict[str, Any]:
        from nebisect.mil.load import load_program

        try:
            spec = _require_ml_program(Path(package))
            described = describe_spec(spec, package)
            # A package whose program cannot load (a missing or corrupt weight file, an
            # op coremltools does not know, a use before its definition) is bad input,
            # found here once, before any case: every case would fail the same way,
            # blamed on its target.
            load_program(Path(package))
        except NebisectError as exc:
            raise NebisectError(unprefixed(str(exc), package)) from None
        return {"inputs": [d.to_dict() for d in described],
                "states": [state.name for state in spec.description.state]}

    return record_verdict(build)


def prove_loadable(package: Path, label: str, *, timeout: float, isolator: Isolator) -> None:
    """Read ``package``'s program in a child, under the memory limit, before this process
    reads it (the reducer cuts the program here): coremltools computes some ops while it
    loads them, and a package may declare smaller shapes than the ones it computes, which
    the size check cannot see. A package that does not load there is one line naming
    ``label``."""
    describe_in_child(f"{__name__}:program_job", {"package": str(package)}, label=label,
                      subject=PROGRAM_SUBJECT, timeout=timeout, needs=COREMLTOOLS_ONLY,
                      isolator=isolator)


def program_job(payload: dict[str, Any]) -> Verdict:
    """Child side of :func:`prove_loadable`: load the program, return an empty record."""
    package = payload["package"]

    def build() -> dict[str, Any]:
        from nebisect.mil.load import load_program

        try:
            load_program(package)
        except NebisectError as exc:
            raise NebisectError(unprefixed(str(exc), package)) from None
        return {}

    return record_verdict(build)


def _require_ml_program(path: Path) -> Any:
    """The spec of the package at ``path``, which must be an ML program."""
    from nebisect.mil.load import read_spec
    from nebisect.mil.sizes import check_spec

    try:
        spec = read_spec(path)
    except Exception as exc:
        raise NebisectError(f"{path}: corrupt package ({type(exc).__name__}: {exc})") from None
    kind = spec.WhichOneof("Type")
    if kind != "mlProgram":
        raise NebisectError(f"{path}: a {kind} model; nebisect needs an ML program")
    check_spec(spec, str(path))
    return spec

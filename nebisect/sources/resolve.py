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
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nebisect.case import SourceRef, torch_form
from nebisect.errors import NebisectError
from nebisect.isolate import COREMLTOOLS_ONLY
from nebisect.isolation.timeouts import Timeouts
from nebisect.mil.roles import InputRole
from nebisect.package import MANIFEST, check_package
from nebisect.sources.domains import (
    MASK,
    MASK_HINT,
    InputDomain,
    infer_masked_outputs,
    parse_masked_outputs,
    role_domains,
)
from nebisect.sources.inputs import InputDescription, describe_spec
from nebisect.sources.loading import (
    ChildSubject,
    PackageArguments,
    describe_in_child,
    record_verdict,
    unprefixed,
)
from nebisect.targets.spec import TargetSpec
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
    #: output → the mask input whose padded positions are not compared (the factory's
    #: declaration, or inferred from the shapes; then ``--masked-output``)
    masked_outputs: dict[str, str] = field(default_factory=dict)
    #: ``masked_outputs`` was inferred from the outputs' shapes (the report says so)
    masks_inferred: bool = False
    #: what the graph says each input is for (:mod:`nebisect.mil.roles`), for the inputs
    #: whose domain nobody declared; ``domains`` holds the domains they imply
    roles: list[InputRole] = field(default_factory=list)
    #: the function of a multifunction package it is ("" for any other source)
    function: str = ""
    #: the model's states (``ct.StateType``, iOS 18): kept between predictions, so the
    #: model is judged over several (``run --steps``); a torch source's are the buffers
    #: its ``forward`` updates in place, converted as states
    states: list[str] = field(default_factory=list)
    #: a package's output names (a torch source's are known once ``forward`` ran:
    #: :func:`output_names`)
    outputs: list[str] = field(default_factory=list)

    def with_domains(self, given: dict[str, InputDomain]) -> Source:
        """This source with ``given`` domains added (``--input-range``: they win over the
        factory's and over the roles inferred from the graph); an input the model does
        not take, or an image domain whose channels it does not have, is an input
        error. An input declared a range is no mask: no inferred masked output follows
        it."""
        names = [d.name for d in self.inputs]
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise NebisectError(f"--input-range names {', '.join(unknown)}, not an input of "
                                f"{self.location} ({', '.join(names)})")
        for desc in self.inputs:
            why = given[desc.name].fits(tuple(lo for lo, _ in desc.dims)) if (
                desc.name in given) else ""
            if why:
                raise NebisectError(f"--input-range {desc.name}: {why}")
        masked = {output: mask for output, mask in self.masked_outputs.items()
                  if not self.masks_inferred or mask not in given or given[mask].kind == MASK}
        return replace(self, domains={**self.domains, **given},
                       roles=[role for role in self.roles if role.name not in given],
                       masked_outputs=masked, masks_inferred=self.masks_inferred and bool(masked))

    def with_masked_outputs(self, given: dict[str, str], outputs: list[str]) -> Source:
        """This source with ``given`` masked outputs (``--masked-output``) among its
        ``outputs``: added to the factory's declared ones, and in place of inferred ones
        (declaring any drops those, as a factory's declaration does). An output the model
        does not have, or an input without a mask domain, is an input error."""
        if not given:
            return self
        masks = [d.name for d in self.inputs
                 if d.name in self.domains and self.domains[d.name].kind == MASK]
        checked = parse_masked_outputs(self.location, given, outputs, masks,
                                       named="--masked-output", hint=MASK_HINT)
        kept = {} if self.masks_inferred else self.masked_outputs
        return replace(self, masked_outputs={**kept, **checked}, masks_inferred=False)

    @property
    def ref(self) -> SourceRef:
        """The model it names (a package, one function of one, or a torch file +
        factory)."""
        return SourceRef(self.kind, self.location, self.function)

    @property
    def reference(self) -> TargetSpec:
        """The oracle: torch fp64 for torch sources, the fp64 simulator otherwise."""
        return self.ref.reference_target


def is_torch_location(text: str) -> bool:
    """Does ``text`` name a torch source: a factory (``path/file.py:factory``) or a saved
    program (``model.pt2``, ``model.pt``)?"""
    return bool(torch_form(text))


def resolve_source(text: str, *, function: str = "", timeout: float = Timeouts.load,
                   isolator: Isolator | None = None) -> Source:
    """Classify and validate a source string; ``timeout`` bounds describing a torch
    source (in a child of ``isolator``, or of a throw-away one). ``function``: the
    function of a multifunction package (its default when ""); a function the package
    does not have, or one named for a torch source, is a one-line error."""
    if is_torch_location(text):
        if function:
            raise NebisectError(f"{text}: --function {function} names a function of a "
                                "multifunction .mlpackage; a torch source has none")
        from nebisect.sources.torch import describe_torch

        described = describe_torch(text, timeout=timeout, isolator=isolator)
        return Source("torch", described.location, described.inputs, described.example,
                      described.domains, described.masked_outputs, described.masks_inferred,
                      states=list(described.states))
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
    record = describe_in_child(f"{__name__}:package_job",
                               PackageArguments(str(path), function), label=text,
                               subject=PACKAGE_SUBJECT, timeout=timeout,
                               needs=COREMLTOOLS_ONLY, isolator=isolator)
    inputs = [InputDescription.from_dict(d) for d in record["inputs"]]
    roles = [InputRole.from_dict(r) for r in record["roles"]]
    masked = dict(record["masked_outputs"])
    return Source("mlpackage", os.path.abspath(path), inputs,
                  domains=role_domains(roles, inputs), roles=roles,
                  masked_outputs=masked, masks_inferred=bool(masked),
                  function=record["function"], states=list(record["states"]),
                  outputs=list(record["outputs"]))


def output_names(source: Source, *, timeout: float = Timeouts.load,
                 isolator: Isolator | None = None) -> list[str]:
    """The outputs of ``source``: a package's, from its description; a torch source's,
    from calling ``forward`` on its example inputs in a child (asked only when an
    option names an output: a ``forward`` that crashes is otherwise a finding)."""
    if not source.ref.is_torch:
        return list(source.outputs)
    from nebisect.sources.torch import torch_outputs

    return torch_outputs(source.location, timeout=timeout, isolator=isolator)


def package_functions(text: str, *, timeout: float = Timeouts.load,
                      isolator: Isolator | None = None) -> tuple[str, ...]:
    """The functions of the multifunction package ``text``, its default first; () for
    any other source (a package without ``description.functions``, a torch source).
    Only the spec is read (in a child): the programs load when each is resolved."""
    path = Path(text)
    if is_torch_location(text) or not (path.is_dir() and (path / MANIFEST).is_file()):
        return ()
    check_package(path, text)
    record = describe_in_child(f"{__name__}:functions_job", PackageArguments(str(path)),
                               label=text, subject=PACKAGE_SUBJECT, timeout=timeout,
                               needs=COREMLTOOLS_ONLY, isolator=isolator)
    return tuple(record["functions"])


def functions_job(arguments: PackageArguments) -> Verdict:
    """Child side of :func:`package_functions`."""
    package = arguments.package

    def build() -> dict[str, Any]:
        from nebisect.mil.load import function_names

        with _named_by_the_parent(package):
            return {"functions": list(function_names(_require_ml_program(Path(package))))}

    return record_verdict(build)


def package_job(arguments: PackageArguments) -> Verdict:
    """Child side of resolving a package: is it an ML program that loads, what are the
    inputs, outputs and states of its (chosen) function, what does its graph say each
    input is for, and which outputs follow a mask? The function comes back by name: ""
    for a package without functions, the default one's when none was asked.

    Reading the spec needs coremltools, whose import in ``run``'s own process would
    cost seconds; the child is forked from the template that simulates the package
    next, so it costs that template nothing it would not import anyway.
    """
    package, function = arguments.package, arguments.function

    def build() -> dict[str, Any]:
        from nebisect.isolation import memory
        from nebisect.mil.load import function_description, function_names, load_program
        from nebisect.mil.roles import infer_roles

        with _named_by_the_parent(package):
            spec = _require_ml_program(Path(package))
            description = function_description(spec, function, package)
            described = describe_spec(description, package)
            chosen = description.name if function_names(spec) else ""
            # A package whose program cannot load (a missing or corrupt weight file, an
            # op coremltools does not know, a use before its definition) is bad input,
            # found here once, before any case: every case would fail the same way,
            # blamed on its target.
            program = load_program(Path(package), chosen, memory_budget=memory.budget())
        roles = infer_roles(program)
        return {"inputs": [d.to_dict() for d in described], "function": chosen,
                "states": [state.name for state in description.state],
                "outputs": [output.name for output in description.output],
                "roles": [role.to_dict() for role in roles],
                "masked_outputs": _masked_outputs(program, roles)}

    return record_verdict(build)


def _masked_outputs(program: Any, roles: list[InputRole]) -> dict[str, str]:
    """Which outputs of the loaded ``program`` follow which input the graph says is a
    mask, by their shapes (:func:`~nebisect.sources.domains.infer_masked_outputs`).

    Every flexible dim reads as one ``"?"``: once a package is loaded, each flexible
    input and each op's result get symbols of their own (the hidden states' sequence
    ``is0``, the mask's ``is1``, the output's ``is18``), so their names cannot pair
    them. An output whose axes do not line up with its mask at run time is compared
    whole (:func:`~nebisect.sources.domains.masked_positions`)."""
    from coremltools.converters.mil.mil.types.symbolic import is_symbolic

    from nebisect.mil.load import MAIN
    from nebisect.mil.roles import MASK as MASK_ROLE

    def dims(shape: Any) -> tuple[Any, ...]:
        return tuple("?" if is_symbolic(dim) else int(dim) for dim in shape)

    block = program.functions[MAIN]
    masks = {role.name: dims(block.inputs[role.name].shape) for role in roles
             if role.role == MASK_ROLE}
    shaped = {var.name: dims(var.shape) for var in block.outputs
              if getattr(var, "shape", None) is not None}
    return infer_masked_outputs(shaped, masks) if masks else {}


def prove_loadable(package: SourceRef, label: str, *, timeout: float,
                   isolator: Isolator) -> None:
    """Read the program ``package`` names (of its function) in a child, under the memory
    limit, before this process reads it (the reducer cuts the program here): coremltools
    computes some ops while it loads them, and a package may declare smaller shapes than
    the ones it computes, which the size check cannot see. A package that does not load
    there is one line naming ``label``."""
    describe_in_child(f"{__name__}:program_job",
                      PackageArguments(package.location, package.function), label=label,
                      subject=PROGRAM_SUBJECT, timeout=timeout, needs=COREMLTOOLS_ONLY,
                      isolator=isolator)


def program_job(arguments: PackageArguments) -> Verdict:
    """Child side of :func:`prove_loadable`: load the program, return an empty record."""
    package = arguments.package

    def build() -> dict[str, Any]:
        from nebisect.isolation import memory
        from nebisect.mil.load import load_program

        with _named_by_the_parent(package):
            load_program(package, arguments.function, memory_budget=memory.budget())
        return {}

    return record_verdict(build)


@contextmanager
def _named_by_the_parent(package: str) -> Iterator[None]:
    """A child's input error about ``package`` without the package's path in front: the
    parent puts the name the user typed there (``describe_in_child``'s label)."""
    try:
        yield
    except NebisectError as exc:
        raise NebisectError(unprefixed(str(exc), package)) from None


def _require_ml_program(path: Path) -> Any:
    """The spec of the package at ``path``, which must be an ML program."""
    from nebisect.isolation import memory
    from nebisect.mil.load import read_spec
    from nebisect.mil.sizes import check_spec

    try:
        spec = read_spec(path)
    except Exception as exc:
        raise NebisectError(f"{path}: corrupt package ({type(exc).__name__}: {exc})") from None
    kind = spec.WhichOneof("Type")
    if kind != "mlProgram":
        raise NebisectError(f"{path}: a {kind} model; nebisect needs an ML program")
    check_spec(spec, str(path), memory.budget())
    return spec

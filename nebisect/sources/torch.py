"""Describe a torch source (``path/to/file.py:factory``) without running it here.

The module body and the factory run in an isolated child (:func:`describe_job`); the
parent receives a :class:`TorchDescription`: the inputs the converted package will
declare, the dynamic dims and the states (the buffers ``forward`` updates in place,
which the conversion keeps as ``ct.StateType`` states). That is all ``run``, ``bisect``
and ``fix`` need before the conversion child takes over. A ``forward`` that crashes is a
finding of the cases that run it, not a source that cannot be loaded: called here to
find the states, one that raises has none. Its output names are read (in a child that
calls it) only when an option names an output (:func:`torch_outputs`, for
``--masked-output``).

The description also says how long building the module took (``build_seconds``):
what holding it built in a template saves each child (:func:`held_needs`).

The location is made absolute here, once: every later child (conversion, the eager
reference) gets the same absolute path, so a factory or ``forward`` that changes the
working directory cannot make the reference lose its own source.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from nebisect.arrays import sha256_path
from nebisect.case import FACTORY, TORCH, SourceRef, torch_form
from nebisect.codec import Form, Record
from nebisect.errors import NebisectError
from nebisect.isolate import Isolator, Needs
from nebisect.sources.domains import InputDomain
from nebisect.sources.inputs import InputDescription
from nebisect.sources.loading import (
    ChildSubject,
    SourceArguments,
    describe_in_child,
    describe_with_arrays,
    record_outcome,
    record_verdict,
    unprefixed,
)
from nebisect.sources.torch_load import holding
from nebisect.sources.torch_module import TORCH_AND_COREMLTOOLS

FACTORY_SUBJECT = ChildSubject("the factory", "describing the model")

Range = tuple[int, int]


@dataclass
class TorchDescription(Record):
    """What the parent knows of a torch source: a record, never the module itself.

    ``example`` holds the factory's example inputs as the package's inputs take them
    (float32 values, int32 ids); they cross the process boundary as ``.npz`` arrays
    beside this record, not inside its JSON.
    """

    json_form: ClassVar[Form] = Form(skipped=("example",))

    location: str
    inputs: list[InputDescription]
    dynamic_dims: dict[str, dict[int, Range]] = field(default_factory=dict)
    example: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    #: the factory's declared input domains
    domains: dict[str, InputDomain] = field(default_factory=dict)
    #: output → the mask input its [batch, seq] positions follow
    masked_outputs: dict[str, str] = field(default_factory=dict)
    #: ``masked_outputs`` was inferred from the outputs' shapes, not declared
    masks_inferred: bool = False
    #: wall seconds the child took to import the file and call the factory
    build_seconds: float = 0.0
    #: the buffers ``forward`` updates in place, by the names of the states the
    #: converted package keeps them in (``TorchSource.state_names``)
    states: list[str] = field(default_factory=list)


def absolute_location(text: str) -> str:
    """``rel/file.py:factory`` → ``/abs/rel/file.py:factory``, ``rel/m.pt2`` →
    ``/abs/rel/m.pt2`` (checked, not resolved)."""
    from nebisect.sources.torch_module import parse_location

    if torch_form(text) != FACTORY:
        if not os.path.isfile(text):
            raise NebisectError(f"{text}: no such file")
        return os.path.abspath(text)
    path, factory = parse_location(text)
    if not path.is_file():
        raise NebisectError(f"{path}: no such file")
    return f"{os.path.abspath(path)}:{factory}"


def describe_job(arguments: SourceArguments) -> Any:
    """Child side: import the source, call its factory, validate, return the record."""

    def build() -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        from nebisect.sources.torch_load import load_torch_source
        from nebisect.sources.torch_module import check_rebuilds_identically

        location = arguments.source
        try:
            started = time.perf_counter()
            loaded = load_torch_source(location)
            build_seconds = time.perf_counter() - started
            if torch_form(location) == FACTORY:
                # a saved program loads the same weights every time
                check_rebuilds_identically(location, loaded)
        except NebisectError as exc:
            raise NebisectError(unprefixed(str(exc), location)) from None
        described = loaded.descriptions()
        example = {d.name: loaded.example_inputs[d.name].detach().cpu().numpy().astype(d.dtype)
                   for d in described}
        masked, inferred = loaded.output_masks()
        record = TorchDescription(arguments.source, described, loaded.dynamic_dims,
                                  domains=loaded.domains, masked_outputs=masked,
                                  masks_inferred=inferred, build_seconds=build_seconds,
                                  states=loaded.state_names()).to_dict()
        return record, example

    return record_outcome(build)


def outputs_job(arguments: SourceArguments) -> Any:
    """Child side of :func:`torch_outputs`: ``forward``'s output names on the example."""

    def build() -> dict[str, Any]:
        from nebisect.sources.torch_load import load_torch_source

        location = arguments.source
        try:
            return {"outputs": load_torch_source(location).output_names()}
        except NebisectError as exc:
            raise NebisectError(unprefixed(str(exc), location)) from None

    return record_verdict(build)


def torch_outputs(location: str, *, timeout: float,
                  isolator: Isolator | None = None) -> list[str]:
    """The output names of the torch source at ``location`` (absolute, as described):
    ``forward`` is called on the example inputs in an isolated child. Only an option
    naming an output asks (``--masked-output``): a ``forward`` that crashes is otherwise
    a finding of the cases that run it, not a source that cannot be described."""
    record = describe_in_child("nebisect.sources.torch:outputs_job", SourceArguments(location),
                               label=location, subject=FACTORY_SUBJECT, timeout=timeout,
                               needs=TORCH_AND_COREMLTOOLS, isolator=isolator)
    return list(record["outputs"])


_described: dict[tuple[str, str], TorchDescription] = {}
_lock = threading.Lock()


def describe_torch(text: str, *, timeout: float,
                   isolator: Isolator | None = None) -> TorchDescription:
    """Describe ``text`` in an isolated child (once per process and file content)."""
    location = absolute_location(text)
    key = (location, sha256_path(SourceRef(TORCH, location).file))
    with _lock:
        if key not in _described:
            record, example = describe_with_arrays(
                "nebisect.sources.torch:describe_job", SourceArguments(location), label=text,
                subject=FACTORY_SUBJECT, timeout=timeout,
                # the conversion job's needs: a run that describes and then converts a
                # source forks both children from one warm template
                needs=TORCH_AND_COREMLTOOLS,
                isolator=isolator,
            )
            described = TorchDescription.from_dict(record)
            described.example = example
            _described[key] = described
        return _described[key]


#: A source that builds faster than this is not held in a template of its own: the
#: template costs seconds to start (a fresh interpreter importing torch and
#: coremltools) and its memory while it lives, to save each child the build. A one-op
#: source builds in about a millisecond, and the atlas judges hundreds of them on one
#: runner: held, each started its own template and the sweep ran 2.9× slower
#: (bench/atlas.py). A real model builds in a second or more and is held.
HOLD_FROM_SECONDS = 0.05


def held_needs(location: str) -> Needs:
    """What a child that runs the torch source at ``location`` should find in its
    template: the module built (:func:`~nebisect.sources.torch_load.holding`), unless
    this process described it and it built in under :data:`HOLD_FROM_SECONDS` — then
    nothing: the child builds it itself, in a template other sources share."""
    seconds = next((d.build_seconds for (where, _), d in _described.items()
                    if where == location), None)
    return Needs() if seconds is not None and seconds < HOLD_FROM_SECONDS else holding(location)

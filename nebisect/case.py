"""Cases: the content-addressed units every command passes around.

A case names *what* runs (source artifact, inputs), *where* (target spec) and *how far*
(stage). Its identity is the sha256 of the bytes involved, so "the same case" always
means the same model and the same inputs — a stale artifact can never pose as another.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from nebisect.arrays import sha256_bytes
from nebisect.codec import Form, Record
from nebisect.errors import NebisectError
from nebisect.targets.spec import (
    REFERENCE_SPEC,
    TORCH_REFERENCE_SPEC,
    TargetSpec,
    check_target_grammar,
)
from nebisect.verdict import CASE_STAGES, Stage

#: A reference artifact ``(kind, location)``, e.g. ``("torch", "m.py:factory")``: the
#: JSON shape of a :class:`SourceRef` inside :class:`CaseOptions`.
ArtifactRef = tuple[str, str]

#: The three shapes of a model a case names (:class:`SourceRef`).
PACKAGE, TORCH, BUILDER = "mlpackage", "torch", "builder"
SOURCE_KINDS = (PACKAGE, BUILDER, TORCH)

#: The forms a torch source's location takes: Python code and a factory in it, or a
#: saved program — an ``ExportedProgram`` (``torch.export.save``) or TorchScript
#: (``torch.jit.save``), told apart by the file's suffix.
FACTORY, EXPORTED, SCRIPTED = "factory", "exported", "scripted"
SAVED_SUFFIXES = {".pt2": EXPORTED, ".pt": SCRIPTED, ".pth": SCRIPTED, ".ts": SCRIPTED}


def torch_form(location: str) -> str:
    """Which form of torch source ``location`` names — :data:`FACTORY`
    (``path/file.py:factory``), :data:`EXPORTED` or :data:`SCRIPTED` (a saved program's
    path) — or "" when it names none (a package, a builder)."""
    path, sep, factory = location.rpartition(":")
    if sep and path.endswith(".py") and factory:
        return FACTORY
    return SAVED_SUFFIXES.get(Path(location).suffix.lower(), "")


@dataclass(frozen=True)
class SourceRef:
    """A model as a case names it — one of three shapes, told apart by ``kind``:

    * ``mlpackage``: ``location`` is the package's path;
    * ``torch``: ``location`` is ``path/file.py:factory``, a file and the factory in it,
      or the path of a saved program (``model.pt2``, ``model.pt``: :func:`torch_form`);
    * ``builder``: ``location`` is ``module:function`` building a MIL program in code
      (no file: it is imported).

    ``function`` names one function of a multifunction package (``ct.utils.
    save_multifunction``: a prefill/decode pair, LoRA adapters): each is a program of its
    own, with inputs of its own, so it is part of the model's identity; "" for a package
    without ``description.functions``, whose one function is ``main``. Its JSON leaves it
    out when "".

    :meth:`files` are the files it names, :meth:`rebased` names them under another
    folder (where an executor shipped them), :attr:`reference_target` is its oracle.
    """

    json_form: ClassVar[Form] = Form(omit_defaults=("function",))

    kind: str
    location: str
    function: str = ""

    def __post_init__(self) -> None:
        if self.kind not in SOURCE_KINDS:
            raise NebisectError(f"unknown source kind {self.kind!r}: one of "
                                f"{', '.join(SOURCE_KINDS)}")
        if self.function and not self.is_package:
            raise NebisectError(f"{self.location}: only an .mlpackage has functions to pick "
                                f"(--function {self.function})")

    @property
    def is_package(self) -> bool:
        return self.kind == PACKAGE

    @property
    def is_torch(self) -> bool:
        return self.kind == TORCH

    @property
    def is_builder(self) -> bool:
        return self.kind == BUILDER

    @property
    def file(self) -> str:
        """The file it names: the package, the torch source's ``.py`` or saved program;
        "" for a builder."""
        if self.is_torch and torch_form(self.location) == FACTORY:
            return self.location.rpartition(":")[0]
        return self.location if self.is_package or self.is_torch else ""

    @property
    def factory(self) -> str:
        """A torch factory's name; "" for a saved program and the other shapes."""
        factory = self.is_torch and torch_form(self.location) == FACTORY
        return self.location.rpartition(":")[2] if factory else ""

    def files(self) -> tuple[str, ...]:
        """The files a run of it needs shipped (none for a builder)."""
        return (self.file,) if self.file else ()

    def moved(self, move: Callable[[str], str]) -> SourceRef:
        """The same model with its file renamed by ``move`` (a builder is unchanged)."""
        file = self.file
        return self if not file else replace(self, location=move(file) + self.location[len(file):])

    def rebased(self, root: str | os.PathLike[str]) -> SourceRef:
        """The same model with its (relative) file named under ``root``."""
        return self.moved(lambda file: str(Path(root) / file))

    @property
    def reference_target(self) -> TargetSpec:
        """Its oracle: torch fp64 for a torch source, the fp64 simulator otherwise."""
        return TORCH_REFERENCE_SPEC if self.is_torch else REFERENCE_SPEC


@dataclass(frozen=True)
class CaseOptions(Record):
    """The small knobs of one case, as read by :func:`nebisect.evaluate.judge.evaluate`.

    ``plugins``: modules registering extra targets, imported in the child (a corpus
    record names its own files, ``plugins/*.py``). ``params``: a builder's keyword
    arguments. ``outputs``: compare only these outputs. ``intermediates``: return every
    intermediate value too. ``judge_precision``: compare in the ULPs of this precision
    instead of the target's (set by :meth:`judged_against` alone).
    ``op_of_interest``: the op type whose placement decides ``unrouted``.
    ``reference_source``: the artifact the reference runs when it is not the case's own.
    ``convert_path``: the one conversion path (``export``/``trace``) a torch case's bug
    lives on, which replay converts. ``masked_outputs``: output → the mask input whose
    padded positions (mask 0) of that output are not compared (nobody reads them, and any
    two correct implementations may differ there). ``note_placement``: without an op of
    interest, placement off the target's device is information in the verdict, never
    ``unrouted`` (``run`` without ``--require``; corpus cases, bisection and fuzzing
    leave it off and fail closed). ``steps``: a stateful model is judged over this many
    successive predictions on the inputs, its state carried (a decode loop), up to the
    first step that fails; a model without state is predicted once.

    Its JSON form leaves out every field at its default (the form enters corpus case ids,
    so a stored case keeps its id and its ``case.json`` bytes); an unknown key or a
    wrongly typed value is an input error, never dropped (a dropped option would run
    another case than the one recorded).
    """

    json_form: ClassVar[Form] = Form(what="case option", omit_defaults=True)

    plugins: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)
    outputs: tuple[str, ...] = ()
    intermediates: bool = False
    judge_precision: str = ""
    op_of_interest: str = ""
    reference_source: ArtifactRef | None = None
    convert_path: str = ""
    masked_outputs: dict[str, str] = field(default_factory=dict)
    note_placement: bool = False
    steps: int = 1

    def judged_against(self, reference: SourceRef, *, source: SourceRef,
                       precision: str, reference_precision: str = "fp64") -> CaseOptions:
        """These options with the reference run on ``reference``, and the precision
        the comparison then needs.

        The one place of the rule: a converted package (``source``, a package)
        judged against its torch module on an fp64 target (``precision``, the target's;
        the caller holds the registry a record must not need) is judged in fp32 ULPs.
        The converter stores weights and constants as fp32, so even a perfect
        conversion differs from torch fp64 by fp32 rounding. Against torch in float32
        (``reference_precision``: a model that pins float32 cannot run in float64), fp32
        and fp64 targets are judged in fp16 ULPs: two float32 computations of one model
        differ by their own rounding, which grows with depth.
        """
        converted = source.is_package and reference.is_torch
        judge = "fp32" if converted and precision == "fp64" else ""
        if converted and reference_precision == "fp32" and precision in ("fp32", "fp64"):
            judge = "fp16"
        return replace(self, reference_source=(reference.kind, reference.location),
                       judge_precision=judge)

    def judging_precision(self, target_precision: str) -> str:
        """The precision whose ULPs a comparison counts: :attr:`judge_precision` when
        set, else the target's own."""
        return self.judge_precision or target_precision


def case_stage(name: str) -> Stage:
    """The stage a case may be asked to run to, by name; anything else is an input error."""
    if name not in CASE_STAGES:
        raise NebisectError(f"unknown stage {name!r}: one of {', '.join(CASE_STAGES)}")
    return Stage(name)


@dataclass
class Case(Record):
    """One (model, inputs, target, stage) tuple; JSON-serializable.

    ``ref`` is the model (:class:`SourceRef`: a package, a torch file and factory, or a
    builder for programs built in code, as the fuzzer makes them). ``options`` carries
    small knobs (:class:`CaseOptions`) such as the op of interest whose placement decides
    ``unrouted``. Its JSON only crosses to a child or a worker; what a corpus stores is
    a :class:`~nebisect.corpus.record.CaseRecord`.
    """

    ref: SourceRef
    target: str
    stage: Stage = Stage.PREDICT
    inputs_path: str = ""
    model_sha256: str = ""
    inputs_sha256: str = ""
    options: CaseOptions = field(default_factory=CaseOptions)

    def __post_init__(self) -> None:
        self.stage = case_stage(self.stage)
        check_target_grammar(self.target)

    @property
    def case_id(self) -> str:
        """Content address of the case: same bytes, same factory or function, same target,
        same stage → same id (two factories in one torch file, two functions of one
        package are two cases)."""
        factory = self.ref.factory or self.ref.function
        key = json.dumps(
            [self.model_sha256 or self.ref.location, factory, self.inputs_sha256, self.target,
             self.stage, self.options.to_dict()],
            sort_keys=True,
        )
        return sha256_bytes(key.encode())[:16]

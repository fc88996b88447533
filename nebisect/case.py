"""Cases and target specs: the content-addressed units every command passes around.

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
from nebisect.verdict import CASE_STAGES, Stage

BACKENDS = ("sim", "coreml", "torch", "coreml-remote")
SIM_VARIANTS = ("fp64", "fp32", "fp16", "fp16-naive", "ane")
#: Op semantics a sim target may name after its variant (``sim:fp16:spec``); without one
#: it follows the Core ML runtime (``coreml``). See nebisect.mil.semantics.
SIM_SEMANTICS = ("coreml", "spec")
COREML_VARIANTS = ("cpu", "gpu", "ne", "all")
TORCH_DEVICES = ("cpu",)
TORCH_DTYPES = ("fp32", "fp16", "bf16", "fp64")
#: The exact oracle (DESIGN §2): the MIL simulator in float64, every non-torch source's
#: reference and the probe that tells a conversion bug from a precision one. One name,
#: so a renamed simulator target cannot leave a stale copy behind.
REFERENCE_TARGET = "sim:fp64"
#: The oracle of a torch source: its module run eagerly in float64.
TORCH_REFERENCE = "torch:cpu:fp64"


class TargetSpecError(NebisectError, ValueError):
    """An unknown or malformed target spec string."""


@dataclass(frozen=True)
class TargetSpec:
    """A parsed target spec such as ``sim:fp16``, ``sim:fp16:spec``, ``coreml:ne``,
    ``coreml-remote:<device>:ne`` or ``torch:cpu:fp32``; ``semantics`` is set only when a
    sim spec names it, ``device`` only for a remote Core ML device (an iPhone, an iPad)."""

    backend: str
    variant: str
    dtype: str = ""
    semantics: str = ""
    device: str = ""

    def __str__(self) -> str:
        parts = (self.backend, self.device, self.variant, self.dtype, self.semantics)
        return ":".join(p for p in parts if p)

    @property
    def precision(self) -> str:
        """The storage precision the target computes in: fp16, fp32 or fp64.

        Used to pick the conversion precision and the oracle's ULP scale.
        """
        if self.backend == "torch":
            return {"fp16": "fp16", "bf16": "bf16", "fp64": "fp64"}.get(self.dtype, "fp32")
        if self.backend == "sim":
            return {"fp64": "fp64", "fp32": "fp32"}.get(self.variant, "fp16")
        return "fp32" if self.variant == "cpu" else "fp16"

    @property
    def runs_programs(self) -> bool:
        """Does the target run ML programs (a simulator, Core ML), as opposed to torch
        eager? Only those have conversion paths, ops to blame and intermediates."""
        return self.backend != "torch"

    @property
    def simulated(self) -> bool:
        """Is the target nebisect's MIL simulator (deterministic: a verdict needs no
        re-check)?"""
        return self.backend == "sim"

    @staticmethod
    def parse(spec: str) -> TargetSpec:
        """The grammar of a target spec string, with an error that lists what would have
        been valid. Registry-blind: :func:`nebisect.targets.spec_of` is the parser every
        caller uses (it also knows plugin targets, which inherit a parent's grammar)."""
        parts = spec.strip().split(":")
        backend = parts[0]
        if backend not in BACKENDS:
            raise TargetSpecError(
                f"unknown target {spec!r}: backend must be one of {', '.join(BACKENDS)} "
                f"(e.g. sim:fp16, coreml:ne, torch:cpu:fp32)"
            )
        if backend == "torch":
            device = parts[1] if len(parts) > 1 else "cpu"
            dtype = parts[2] if len(parts) > 2 else "fp32"
            if device not in TORCH_DEVICES or dtype not in TORCH_DTYPES or len(parts) > 3:
                raise TargetSpecError(
                    f"unknown target {spec!r}: torch targets are torch:cpu[:"
                    f"{'|'.join(TORCH_DTYPES)}]"
                )
            return TargetSpec("torch", device, dtype)
        if backend == "coreml-remote":
            if len(parts) != 3 or not parts[1].strip() or parts[2] not in COREML_VARIANTS:
                raise TargetSpecError(
                    f"unknown target {spec!r}: remote targets are coreml-remote:<device>:"
                    f"{'|'.join(COREML_VARIANTS)} (device: a name, UDID or identifier that "
                    "`xcrun devicectl list devices` shows)")
            return TargetSpec(backend, parts[2], device=parts[1].strip())
        variants = SIM_VARIANTS if backend == "sim" else COREML_VARIANTS
        if backend == "sim" and len(parts) == 3 and parts[1] in variants:
            if parts[2] not in SIM_SEMANTICS:
                raise TargetSpecError(
                    f"unknown target {spec!r}: a sim target's semantics is one of "
                    f"{', '.join(SIM_SEMANTICS)} (e.g. sim:fp16:spec)"
                )
            return TargetSpec(backend, parts[1], semantics=parts[2])
        if len(parts) != 2 or parts[1] not in variants:
            raise TargetSpecError(
                f"unknown target {spec!r}: {backend} targets are "
                + ", ".join(f"{backend}:{v}" for v in variants)
            )
        return TargetSpec(backend, parts[1])


def check_target_grammar(spec: str) -> None:
    """Check the shape of a target name (``backend:variant[:more]``), not the registry.

    A :class:`Case` is a plain record: building one must not need the target registry
    (or a plugin) loaded. Whether the name is registered is checked where a target is
    looked up (:func:`nebisect.targets.get_target`), which is also where plugin names
    such as ``sim:fp16-nan-suppressing`` become known.
    """
    parts = spec.split(":")
    if parts[0] not in BACKENDS or len(parts) > 3 or not all(parts):
        raise TargetSpecError(
            f"unknown target {spec!r}: a target is backend:variant with backend one of "
            f"{', '.join(BACKENDS)} (e.g. sim:fp16, coreml:ne, torch:cpu:fp32)")


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
    def reference_target(self) -> str:
        """Its oracle: torch fp64 for a torch source, the fp64 simulator otherwise."""
        return TORCH_REFERENCE if self.is_torch else REFERENCE_TARGET


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

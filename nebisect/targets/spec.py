"""Target specs: the grammar of a target name (``sim:fp16``, ``coreml:ne``,
``torch:cpu:fp32``) and the oracle targets' names.

A bottom module: records (a :class:`~nebisect.case.Case`) and every layer above use it
without loading the target registry; :func:`nebisect.targets.registry.spec_of` adds the
plugin targets the registry knows.
"""

from __future__ import annotations

from dataclasses import dataclass

from nebisect.errors import NebisectError

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
        been valid. Registry-blind: :func:`nebisect.targets.registry.spec_of` is the parser every
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



#: :data:`REFERENCE_TARGET` and :data:`TORCH_REFERENCE` parsed: the oracles as the code
#: below the options holds targets.
REFERENCE_SPEC = TargetSpec.parse(REFERENCE_TARGET)
TORCH_REFERENCE_SPEC = TargetSpec.parse(TORCH_REFERENCE)

def check_target_grammar(spec: str) -> None:
    """Check the shape of a target name (``backend:variant[:more]``), not the registry.

    A :class:`Case` is a plain record: building one must not need the target registry
    (or a plugin) loaded. Whether the name is registered is checked where a target is
    looked up (:func:`nebisect.targets.registry.get_target`), which is also where plugin names
    such as ``sim:fp16-nan-suppressing`` become known.
    """
    parts = spec.split(":")
    if parts[0] not in BACKENDS or len(parts) > 3 or not all(parts):
        raise TargetSpecError(
            f"unknown target {spec!r}: a target is backend:variant with backend one of "
            f"{', '.join(BACKENDS)} (e.g. sim:fp16, coreml:ne, torch:cpu:fp32)")

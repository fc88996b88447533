"""``run file.py:factory --compress SPEC``: a torch source's conversion, compressed.

What a compression costs is measured against the uncompressed program
(:mod:`nebisect.evaluate.compression`, ``run COMPRESSED --baseline ORIGINAL``). For a
torch source nebisect makes both packages itself: the source is converted as every run
converts it (:func:`nebisect.sources.convert.convert_isolated`: fp16, coremltools'
defaults, the first of the run's paths that converts — torch.export, else jit.trace),
and that package is compressed by ``coremltools.optimize.coreml`` in an isolated child
of its own (:func:`compress_job`) with the optimizer's defaults — among them its
``weight_threshold`` (:data:`WEIGHT_THRESHOLD`): weights smaller than that stay as they
are, as they do when you call the optimizer yourself. The run then judges the compressed
package with the uncompressed one as its baseline.

A SPEC (:func:`parse_compress`) is ``palettize:N`` (k-means palettization to N bits),
``quantize:int8`` / ``quantize:int4`` (symmetric linear quantization, a scale per output
channel) or ``prune:S`` (magnitude pruning to sparsity S).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from nebisect.codec import Form, Record
from nebisect.errors import NebisectError
from nebisect.sources.convert import PATH_LABELS, conversion_precision
from nebisect.sources.loading import ChildSubject, describe_in_child, record_verdict
from nebisect.sources.resolve import is_torch_location
from nebisect.sources.torch_module import PATHS, TORCH_AND_COREMLTOOLS
from nebisect.verdict import Verdict

if TYPE_CHECKING:
    from nebisect.isolate import Isolator
    from nebisect.sources.resolve import Source

#: the bit widths coremltools palettizes to
PALETTE_BITS = (1, 2, 3, 4, 6, 8)
#: the dtypes ``quantize:`` takes (int4 needs an iOS18 / macOS15 deployment target)
QUANTIZE_DTYPES = ("int8", "int4")
#: the valid SPECs, as an error line and ``--help`` say them
FORMS = ("palettize:N (N = 1, 2, 3, 4, 6 or 8 bits), quantize:int8, quantize:int4 or "
         "prune:S (a sparsity 0 < S < 1), e.g. palettize:4")
#: coremltools' default ``weight_threshold``: smaller weights are left uncompressed
WEIGHT_THRESHOLD = 2048
#: the precision the compressed package is converted at (a shipped program's)
COMPRESSED_PRECISION = "fp16"
COMPRESS_SUBJECT = ChildSubject("compressing the conversion", "the compressed package",
                                " during compression")
_SPEC = re.compile(r"(?P<kind>palettize|quantize|prune):(?P<value>[^:\s]+)")


@dataclass(frozen=True)
class CompressSpec:
    """A checked SPEC: ``palettize`` with ``bits``, ``quantize`` with ``dtype``, or
    ``prune`` with ``sparsity``."""

    kind: str
    bits: int = 0
    dtype: str = ""
    sparsity: float = 0.0

    @property
    def text(self) -> str:
        """The SPEC as typed back (``palettize:4``, ``quantize:int8``, ``prune:0.5``)."""
        value = {"palettize": str(self.bits), "quantize": self.dtype,
                 "prune": f"{self.sparsity:g}"}[self.kind]
        return f"{self.kind}:{value}"

    def apply(self, model: Any) -> Any:
        """``model`` (an ML program) compressed by ``coremltools.optimize.coreml``."""
        import coremltools.optimize.coreml as cto

        if self.kind == "palettize":
            return cto.palettize_weights(model, cto.OptimizationConfig(
                global_config=cto.OpPalettizerConfig(nbits=self.bits, mode="kmeans")))
        if self.kind == "quantize":
            return cto.linear_quantize_weights(model, cto.OptimizationConfig(
                global_config=cto.OpLinearQuantizerConfig(mode="linear_symmetric",
                                                          dtype=self.dtype)))
        return cto.prune_weights(model, cto.OptimizationConfig(
            global_config=cto.OpMagnitudePrunerConfig(target_sparsity=self.sparsity)))


def parse_compress(text: str) -> CompressSpec:
    """``--compress``'s SPEC, checked; else a one-line error naming the valid forms."""
    found = _SPEC.fullmatch(text.strip())
    spec = _spec(found["kind"], found["value"]) if found else None
    if spec is None:
        raise NebisectError(f"--compress {text!r}: give {FORMS}")
    return spec


def _spec(kind: str, value: str) -> CompressSpec | None:
    if kind == "palettize":
        return CompressSpec(kind, bits=int(value)) if value in map(str, PALETTE_BITS) else None
    if kind == "quantize":
        return CompressSpec(kind, dtype=value) if value in QUANTIZE_DTYPES else None
    try:
        sparsity = float(value)
    except ValueError:
        return None
    return CompressSpec(kind, sparsity=sparsity) if 0 < sparsity < 1 else None


def check_compress(text: str, source: str, baseline: Any = None) -> str:
    """``--compress`` as given to ``run``: "" when not given, else the checked SPEC —
    for a torch source, without ``--baseline`` (the uncompressed conversion is the
    baseline). A package is the user's to compress: the error says how to judge it."""
    if not text:
        return ""
    spec = parse_compress(text).text
    if not is_torch_location(source):
        raise NebisectError(
            f"--compress {spec}: {source} is not a torch source — compress the package "
            "yourself (coremltools.optimize.coreml) and judge it with nebisect run "
            f"COMPRESSED.mlpackage --baseline {source}")
    if baseline:
        raise NebisectError(f"--compress {spec} makes its own baseline (the source's "
                            f"uncompressed conversion): drop --baseline {baseline}")
    return spec


@dataclass
class CompressedConversion(Record):
    """A torch source converted on ``path`` at ``precision`` and compressed with ``spec``
    (``run --compress``): the ``package`` judged and its uncompressed ``baseline``, in
    the run's working directory (gone with it, so never in the JSON)."""

    json_form: ClassVar[Form] = Form(skipped=("package", "baseline"))

    spec: str
    path: str
    precision: str
    package: str = ""
    baseline: str = ""

    @property
    def words(self) -> str:
        """``compressed with palettize:4 (its torch.export conversion, fp16)``."""
        return (f"compressed with {self.spec} (its {PATH_LABELS.get(self.path, self.path)} "
                f"conversion, {self.precision})")

    @property
    def baseline_words(self) -> str:
        """What the compressed package was compared with."""
        return f"its uncompressed {PATH_LABELS.get(self.path, self.path)} conversion"


def compress_source(source: Source, spec: str, workdir: Path, isolator: Isolator, *,
                    setup: tuple[str, ...] = (), paths: tuple[str, ...] = PATHS,
                    deployment: str = "", timeout: float = 900.0
                    ) -> tuple[CompressedConversion, Verdict]:
    """The torch ``source`` converted (the run's converter, in its isolated child) and
    compressed with ``spec`` (in another), both packages in ``workdir``, and the convert
    verdict; a source that converts on no path, or that compression fails on, is a
    one-line error."""
    from nebisect.sources.convert import convert_isolated

    workdir.mkdir(parents=True, exist_ok=True)
    baseline, verdict = convert_isolated(source, COMPRESSED_PRECISION, workdir, isolator,
                                         setup=setup, timeout=timeout, deployment=deployment,
                                         paths=paths)
    if baseline is None or verdict.conversion is None:
        said = (verdict.message or verdict.signature).strip().splitlines()
        raise NebisectError(
            f"--compress {spec}: {source.location} does not convert, so there is nothing to "
            f"compress ({said[0] if said else verdict.status}); run it without --compress "
            "to judge its conversion")
    package = workdir / f"compressed-{conversion_precision(COMPRESSED_PRECISION)}.mlpackage"
    describe_in_child(
        f"{__name__}:compress_job",
        CompressArguments(str(baseline), str(package), spec),
        label=f"--compress {spec}", subject=COMPRESS_SUBJECT, timeout=timeout,
        needs=TORCH_AND_COREMLTOOLS, isolator=isolator)
    return CompressedConversion(spec, verdict.conversion.path or "", COMPRESSED_PRECISION,
                                str(package), str(baseline)), verdict


@dataclass(frozen=True)
class CompressArguments:
    """The arguments of :func:`compress_job`: the package, where its compressed copy is
    saved, and the ``--compress`` spec."""

    package: str
    destination: str
    spec: str


def compress_job(arguments: CompressArguments) -> Verdict:
    """Child side of :func:`compress_source`: the package compressed with the spec, saved
    at the destination; its record counts the ``constexpr_*`` ops that decompress its
    weights."""
    return record_verdict(lambda: _compress(arguments))


def _compress(arguments: CompressArguments) -> dict[str, Any]:
    from nebisect.mil.quiet import import_coremltools, quiet
    from nebisect.sources.convert import converter_message, save_package

    ct = import_coremltools()
    spec = parse_compress(arguments.spec)
    try:
        with quiet():
            model = ct.models.MLModel(arguments.package, skip_model_load=True)
            compressed = spec.apply(model)
    except Exception as exc:
        raise NebisectError(f"coremltools.optimize.coreml refused it: "
                            f"{converter_message(exc)}") from exc
    weights = sum(op.op_type.startswith("constexpr_")
                  for function in compressed._mil_program.functions.values()
                  for op in function.operations)
    if not weights:
        raise NebisectError(
            "coremltools compressed no weight: it leaves weights of fewer than "
            f"{WEIGHT_THRESHOLD} elements as they are (its default weight_threshold), and "
            "this model has no larger one")
    save_package(compressed, os.fspath(arguments.destination))
    return {"constexpr_ops": weights}

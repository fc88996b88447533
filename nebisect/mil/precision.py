"""Precision models: how the simulator stores and computes floating-point values.

A precision model answers two questions for every op: in which dtype do its kernels
compute (``compute``), and in which dtype is every floating value stored between ops
(``storage``). Integer and bool values are never touched: they keep the dtype the
program declares.

* ``fp64`` — the oracle: every float is float64 whatever the program declares, so an
  ``fp16`` cast is an identity and the result is the exact math the program describes.
* ``fp32`` — every op computes in float32 and stores its results at the dtype the
  program declares: Core ML's CPU with a float32 program. ML programs are typed ("Typed
  Execution", coremltools guide): a tensor the program declares fp16 — an fp16
  ``op_selector`` conversion, fp16 weights in an fp32 program — is an fp16 tensor on
  the device ("As of iOS 14 and macOS 11, Core ML can also use float16 on the CPU",
  M. Hollemans, neural-engine docs/16-bit.md), so it is rounded to fp16 here too.
* ``fp16`` — every float stored in float16; each op computes in float32 and rounds once
  (a careful fp16 device: max-shifted softmax, fp32 accumulators).
* ``fp16-naive`` — every op computes in float16 arithmetic by its textbook formula
  (``naive`` kernel variants: no max-shift, fp16 accumulators), the worst credible
  lowering, which exposes graph-level range hazards.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from nebisect.mil.blocks import BLOCK, blockwise
from nebisect.registry import Registry


@dataclass(frozen=True)
class PrecisionModel:
    """Compute and storage dtypes of floating values, plus the kernel variants in force.

    ``storage`` None stores every value at the dtype the program declares for it.
    """

    name: str
    compute: type[np.floating]
    storage: type[np.floating] | None
    variants: tuple[str, ...] = ()
    description: str = ""

    @property
    def rounds(self) -> bool:
        """True when kernel results must be rounded from compute to storage dtype."""
        return self.storage is not None and self.compute is not self.storage


#: Precision models by name; the built-in ones are registered below.
PRECISIONS: Registry[str, PrecisionModel] = Registry("precision")


def register_precision(model: PrecisionModel) -> PrecisionModel:
    """Add a precision model to the registry; a duplicate name is an error."""
    return PRECISIONS.register(model.name, model)


def get_precision(name: str) -> PrecisionModel:
    """The precision model called ``name``, or a one-line error listing the known ones."""
    return PRECISIONS.get(name)


def precision_names() -> list[str]:
    return PRECISIONS.names()


FP64 = register_precision(
    PrecisionModel("fp64", np.float64, np.float64, description="float64 oracle")
)
FP32 = register_precision(
    PrecisionModel(
        "fp32", np.float32, None, description="float32 compute, storage as declared (fp16 too)"
    )
)
FP16 = register_precision(
    PrecisionModel(
        "fp16", np.float32, np.float16, description="fp16 storage, fp32 compute, rounded per op"
    )
)
FP16_NAIVE = register_precision(
    PrecisionModel(
        "fp16-naive",
        np.float16,
        np.float16,
        variants=("naive",),
        description="fp16 arithmetic by the textbook formula (no max-shift, fp16 sums)",
    )
)



_SIGN = np.uint32(0x80000000)
_MAGNITUDE = np.uint32(0x7FFFFFFF)
_EXPONENT = np.uint32(0x7F800000)
_HALF_TINY_BITS = np.uint32(0x38800000)  # 2^-14, the smallest normal fp16
_QUANTUM_SHIFT = np.uint32(13 << 23)  # 2^13 times: a number whose ulp is x's fp16 ulp
_OVERFLOW_BITS = np.uint32(0x477FF000)  # from here on x rounds past 65504: ±inf
_ROUNDED_PAST_BITS = np.uint32(0x47800000)  # 65536: |x| rounded to it or past overflowed
_INF_BITS = np.uint32(0x7F800000)
#: 2^-14 in every element of a block: numpy's integer maximum against an array runs its
#: vector loop, against a scalar a loop several times slower
_HALF_TINY_BLOCK = np.full(BLOCK, _HALF_TINY_BITS, np.uint32)


def round_to_fp16(x: np.ndarray) -> np.ndarray:
    """``x.astype(float16).astype(float32)`` bit for bit, without numpy's half casts.

    numpy converts to half precision in software — a few ns per element, and hundreds
    when results are fp16 subnormals, as most softmax outputs are. Here float32
    arithmetic rounds: with ``e`` the exponent of ``|x|``, ``C = 2^(max(e, -14) + 13)``
    has ulp 2^(max(e, -14) - 10), the spacing of fp16 numbers around ``|x|`` (the
    subnormal spacing 2^-24 below the smallest normal), so ``(|x| + C) - C`` is ``|x|``
    rounded to fp16 with float32's own round-to-nearest-even, and exact; the sign is
    put back after. Past 65504 the result is ±inf and NaN stays NaN: both are the rare
    case of a block where ``(|x| + C) - C`` reaches 65536 or is NaN (C itself overflows
    for the largest float32 values), fixed from ``|x|``. The passes run
    block by block in cache, on every core allowed (:mod:`nebisect.mil.blocks`). The
    fp16 precision model keeps its values in float32 arrays rounded this way, so
    kernels that compute in float32 need no conversions either side.
    """
    return blockwise(_round_block, x, 1)


def _round_block(x: np.ndarray, out: np.ndarray, scratch: list[np.ndarray]) -> None:
    (quantum,) = scratch
    x_bits, rounded, quantum_bits = (a.view(np.uint32) for a in (x, out, quantum))
    np.bitwise_and(x_bits, _EXPONENT, out=quantum_bits)
    np.maximum(quantum_bits, _HALF_TINY_BLOCK[: x.size], out=quantum_bits)
    quantum_bits += _QUANTUM_SHIFT
    np.bitwise_and(x_bits, _MAGNITUDE, out=rounded)
    with np.errstate(all="ignore"):  # past the fp16 range C is meaningless: fixed below
        out += quantum
        out -= quantum
    if rounded.size and rounded.max() >= _ROUNDED_PAST_BITS:  # ±inf, NaN (rare)
        magnitude_bits = x_bits & _MAGNITUDE
        rounded[magnitude_bits >= _OVERFLOW_BITS] = _INF_BITS
        nan = magnitude_bits > _INF_BITS
        rounded[nan] = magnitude_bits[nan]
    np.bitwise_and(x_bits, _SIGN, out=quantum_bits)
    rounded |= quantum_bits
